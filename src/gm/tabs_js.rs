//! The page side of `GM_openInTab` and `GM_notification` (and their `GM.*` forms), put in the
//! prelude by `gm::inject` for scripts that grant them. Needs `S`, `d`, `G` in scope.
//!
//! `GM_openInTab` returns at once, as in Violentmonkey, an object with `close()`, `closed` and
//! `onclose`; a held `tab.wait` learns when the tab closes. `GM_notification` takes the details
//! object or `(text, title, image, onclick)`; `onclick` and `ondone` come through a held
//! `notify.wait`. Tampermonkey's `timeout` (ms) closes it from the page (a timer of the page's
//! own, so nothing waits in the worker; past `setTimeout`'s 2^31-1 ms it is ignored, not fired
//! at once), and its `tag` goes to the worker, which replaces the script's notification with
//! the same tag (`provider::gm_tabs`). The page's notifications are closed as it is left
//! (`pagehide`), as Violentmonkey's are. A refusal (an address that is not http(s), a bound) is
//! logged to the console, closes the tab object (its `onclose` called) and rejects the
//! `GM.notification` promise.

pub const OPEN_IN_TAB_JS: &str = concat!(
    // Tampermonkey's `loadInBackground` (Greasemonkey 3's) is `active`'s opposite.
    "const OT=(u,o)=>{if(o==null||typeof o!=='object')o={active:!o};",
    "const act=o.active!==undefined?!!o.active:o.loadInBackground!==undefined?!o.loadInBackground:true;",
    "let url;try{url=new URL(String(u),location.href).href}catch(e){url=String(u)}",
    // An address that is not http(s) is refused here too (the worker judges it again), so the
    // object reads `closed: true` as it is returned, and `onclose` set right after is called,
    // also after `await GM.openInTab(…)`: in a task of its own, after the awaits' microtasks
    // (a tester read `closed: false` until the worker's answer came).
    "const bad=!/^https?:/i.test(url);",
    "const c={closed:bad,onclose:null,close(){p.then(id=>{if(id!=null&&!c.closed)S('tab.close',{tab:id})})}};",
    "const fire=()=>{try{if(typeof c.onclose==='function')c.onclose()}catch(e){queueMicrotask(()=>{throw e})}};",
    "const done=()=>{if(c.closed)return;c.closed=true;fire()};",
    "const p=bad?(console.error('GM_openInTab: only http(s) addresses are opened, not '+url.slice(0,200)),setTimeout(fire),Promise.resolve(null)):",
    "S('tab.open',{url,active:act,insert:o.insert===undefined?true:!!o.insert,",
    "setParent:!!o.setParent}).then(r=>{if(!r||r.error||typeof r.tab!=='number'){",
    "console.error(r&&r.error||'GM_openInTab: no answer from the provider');done();return null}",
    "const w=()=>S('tab.wait',{tab:r.tab}).then(x=>{if(x&&x.event==='close')done();",
    "else if(!c.closed)setTimeout(w,x&&!x.error?0:5000)},()=>setTimeout(w,5000));w();return r.tab});",
    "return c};d('GM_openInTab',OT);",
    // `GM.openInTab`: a promise of the tab object (Greasemonkey 4, Tampermonkey) that is the
    // tab object too (Violentmonkey returns it at once: `GM.openInTab(u).onclose = f`).
    "G.openInTab=(u,o)=>{const c=OT(u,o),q=Promise.resolve(c);Object.defineProperties(q,{",
    "closed:{get:()=>c.closed},onclose:{get:()=>c.onclose,set:v=>{c.onclose=v}},close:{value:()=>c.close()}});return q};",
);

pub const NOTIFICATION_JS: &str = concat!(
    // Tampermonkey's `(details, ondone)` form too; `ondone` is told whether it was clicked.
    "const NOPEN=new Set();",
    "const NO=(a,t,i,f,fail)=>{const obj=a&&typeof a==='object',o=obj?Object.assign({},a):{text:a,title:t,image:i,onclick:f};",
    "if(obj&&typeof t==='function'&&typeof o.ondone!=='function')o.ondone=t;let clicked=false;",
    "const n={remove(){return p.then(id=>id&&S('notify.close',{id}))}};",
    "const cb=(k,...x)=>{try{if(typeof o[k]==='function')o[k].apply(n,x)}catch(e){queueMicrotask(()=>{throw e})}};",
    "const p=S('notify',{text:o.text==null?'':String(o.text),title:o.title==null?'':String(o.title),",
    "image:typeof o.image==='string'?o.image:null,silent:!!o.silent,tag:o.tag==null?'':String(o.tag)}).then(r=>{",
    "if(!r||r.error||typeof r.id!=='string'){const m=r&&r.error||'GM_notification: no answer from the provider';console.error(m);",
    "if(fail)fail(new Error(m));return null}NOPEN.add(r.id);",
    "const tm=Number(o.timeout);if(tm>0&&tm<=2147483647)setTimeout(()=>S('notify.close',{id:r.id}),tm);",
    "const w=()=>S('notify.wait',{id:r.id}).then(x=>{if(x&&x.event==='click'){clicked=true;cb('onclick');w()}",
    "else if(x&&x.event==='close'){NOPEN.delete(r.id);cb('ondone',clicked)}else setTimeout(w,x&&!x.error?0:5000)},()=>setTimeout(w,5000));",
    "w();return r.id});return n};d('GM_notification',NO);",
    // A page's notifications go with it, as Violentmonkey's do: its `onclick` and `timeout`
    // die with the page, and a notification left behind would count against the script's
    // bound until the user closed it.
    "addEventListener('pagehide',e=>{if(e.isTrusted)for(const id of NOPEN)S('notify.close',{id})});",
    // `GM.notification`: a promise settled when it closes (rejected when refused) that has
    // Violentmonkey's `remove()` too.
    "G.notification=(a,...r)=>{let n;const q=new Promise((ok,no)=>{const obj=a&&typeof a==='object',",
    "o=obj?a:{text:a,title:r[0],image:r[1],onclick:r[2]},od=obj&&typeof r[0]==='function'?r[0]:o.ondone;",
    "n=NO(Object.assign({},o,{ondone(c){ok(c);if(typeof od==='function')od.call(this,c)}}),undefined,undefined,undefined,no)});",
    "q.remove=()=>n.remove();return q};",
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
