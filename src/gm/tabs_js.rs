//! The page side of `GM_openInTab` and `GM_notification` (and their `GM.*` forms), put in the
//! prelude by `gm::inject` for scripts that grant them. Needs `S`, `d`, `G` in scope.
//!
//! `GM_openInTab` returns at once, as in Violentmonkey, an object with `close()`, `closed` and
//! `onclose`; a held `tab.wait` learns when the tab closes. `GM_notification` takes the details
//! object or `(text, title, image, onclick)`; `onclick` and `ondone` come through a held
//! `notify.wait`. Tampermonkey's `timeout` (ms) closes it from the page (a timer of the page's
//! own, so nothing waits in the worker; past `setTimeout`'s 2^31-1 ms it is ignored, not fired
//! at once), and its `tag` goes to the worker, which replaces the script's notification with
//! the same tag (`provider::gm_tabs`). A refusal (an address that is not http(s), a bound) is logged to the
//! console and leaves the tab object `closed`.

pub const OPEN_IN_TAB_JS: &str = concat!(
    "const OT=(u,o)=>{if(o==null||typeof o!=='object')o={active:!o};",
    "let url;try{url=new URL(String(u),location.href).href}catch(e){url=String(u)}",
    "const c={closed:false,onclose:null,close(){p.then(id=>{if(id!=null&&!c.closed)S('tab.close',{tab:id})})}};",
    "const done=()=>{if(c.closed)return;c.closed=true;try{if(typeof c.onclose==='function')c.onclose()}catch(e){console.error(e)}};",
    "const p=S('tab.open',{url,active:o.active===undefined?true:!!o.active,insert:o.insert===undefined?true:!!o.insert,",
    "setParent:!!o.setParent}).then(r=>{if(!r||r.error||typeof r.tab!=='number'){c.closed=true;",
    "console.error(r&&r.error||'GM_openInTab: no answer from the provider');return null}",
    "const w=()=>S('tab.wait',{tab:r.tab}).then(x=>{if(x&&x.event==='close')done();",
    "else if(!c.closed)setTimeout(w,x&&!x.error?0:5000)},()=>setTimeout(w,5000));w();return r.tab});",
    "return c};d('GM_openInTab',OT);G.openInTab=(u,o)=>Promise.resolve(OT(u,o));",
);

pub const NOTIFICATION_JS: &str = concat!(
    "const NO=(a,t,i,f)=>{const o=a&&typeof a==='object'?Object.assign({},a):{text:a,title:t,image:i,onclick:f};",
    "const n={remove(){return p.then(id=>id&&S('notify.close',{id}))}};",
    "const cb=k=>{try{if(typeof o[k]==='function')o[k].call(n)}catch(e){console.error(e)}};",
    "const p=S('notify',{text:o.text==null?'':String(o.text),title:o.title==null?'':String(o.title),",
    "image:typeof o.image==='string'?o.image:null,silent:!!o.silent,tag:o.tag==null?'':String(o.tag)}).then(r=>{",
    "if(!r||r.error||typeof r.id!=='string'){console.error(r&&r.error||'GM_notification: no answer from the provider');return null}",
    "const tm=Number(o.timeout);if(tm>0&&tm<=2147483647)setTimeout(()=>S('notify.close',{id:r.id}),tm);",
    "const w=()=>S('notify.wait',{id:r.id}).then(x=>{if(x&&x.event==='click'){cb('onclick');w()}",
    "else if(x&&x.event==='close')cb('ondone');else setTimeout(w,x&&!x.error?0:5000)},()=>setTimeout(w,5000));",
    "w();return r.id});return n};d('GM_notification',NO);",
    "G.notification=(a,...r)=>new Promise(ok=>{const o=a&&typeof a==='object'?a:{text:a,title:r[0],image:r[1],onclick:r[2]};",
    "NO(Object.assign({},o,{ondone(){ok();if(typeof o.ondone==='function')o.ondone.call(this)}}))});",
);

#[cfg(test)]
mod tests {
    #[test]
    fn one_line() {
        for js in [super::OPEN_IN_TAB_JS, super::NOTIFICATION_JS] {
            assert!(!js.contains('\n'));
        }
    }
}
