//! The page side of `GM_download` (and `GM.download`), put in the prelude by `gm::inject` for a
//! script that grants either. Needs `S`, `d`, `G` and `X` (`inject::XHR_CORE_JS`) in scope.
//!
//! As Violentmonkey does it: the file is fetched through `GM_xmlhttpRequest`'s own request
//! (`X`, the same channel message), so the worker decides it exactly as it decides a request —
//! `@connect`, each redirect judged before it is followed, answers of at most 5 MiB, the
//! script's requests in flight and its GM rate window, the same refusal messages — and the page
//! saves the bytes: an object URL of a `Blob`, and a click on an `<a download=name>` that is
//! never put in the document. No `downloads` permission, no message of its own. Measured in
//! Chromium 156 (`gm-download.test.mjs`): a detached anchor clicked from a `USER_SCRIPT` world
//! saves the file into the downloads folder under `name` as Chrome sanitizes it
//! (`../../evil.sh` is saved as `_.._evil.sh`), and revoking the URL right after the click
//! does not stop it (the click holds the blob).
//!
//! The page shares the DOM, so nothing here trusts it: the element is made with
//! `Document.prototype.createElementNS` (HTML's namespace, so an SVG or XML document gives an
//! anchor too) taken before any script code runs (a page's
//! `<img name="createElement">` shadows `document.createElement` in every world), it is never
//! in the document (no page listener or observer sees it or its `blob:` URL, which the page's
//! origin could read), and the URL is revoked at once. The DOM functions it calls are taken when
//! this code runs, before the script's own, as `runtime.js` takes `sendMessage`.
//!
//! Details read: `url` (relative to the page), `name` (else the URL's last path segment, else
//! `download`), `headers`, `timeout`, `onload`, `onerror`, `onprogress`, `ontimeout`, `onabort`;
//! `saveAs` and `conflictAction` are ignored (no dialog; Chrome's own naming on a clash). A
//! failure calls `onerror` with `{error, details}` as Tampermonkey does: `error` is
//! `not_whitelisted` when the script's `@connect` rules refused the URL or a redirect (the
//! worker's `connect` flag), else `not_succeeded`; `details` is the worker's sentence, naming
//! `GM_download`. A non-2xx answer is such a failure, never a saved error page. `onload` comes
//! once the file is handed to Chrome's download, not when it is written.

pub const DOWNLOAD_JS: &str = concat!(
    // Taken now, before the script's own code (and a page's clobbered `document` names).
    // `createElementNS` in HTML's namespace: `createElement` in an SVG or XML document makes an
    // element of no namespace, which has no `click` (the save failed there).
    "const DLA=Reflect.apply,DLC=Document.prototype.createElementNS,DLS=Element.prototype.setAttribute,",
    "DLK=HTMLElement.prototype.click,DLO=URL.createObjectURL,DLR=URL.revokeObjectURL,DLB=Blob,DLU=Uint8Array,",
    "DL64=atob,DLD=document,DLW=setTimeout,DLN0=performance.now.bind(performance);",
    // Chrome drops a page's download clicks past 10 in a second, without a word (measured in
    // Chromium 156: of 20 clicked as their files came, the 11th to the 17th saved nothing):
    // clicks are spaced 110 ms apart, so a batch is saved whole and `onload` stays true.
    "let DLT=0;const DLQ=f=>{const now=DLN0(),at=Math.max(now,DLT);DLT=at+110;if(at<=now)f();else DLW(f,at-now)};",
    // The request's messages name GM_xmlhttpRequest (or the try's stand-in, `GM (xhr)`).
    "const DLM=m=>String(m).replace(/^GM_xmlhttpRequest\\b|^GM \\(xhr\\)/,'GM_download');",
    "const DLN=u=>{try{const p=new URL(u).pathname,x=p.slice(p.lastIndexOf('/')+1);",
    "if(x){try{return decodeURIComponent(x)}catch(e){return x}}}catch(e){}return'download'};",
    "const DLP=(a,b)=>a!==null&&typeof a==='object'&&!(a instanceof URL)?a:{url:a,name:b};",
    "const DL=(a,b)=>{const o=DLP(a,b);let settled=false;",
    "const call=(n,v)=>{let f;try{f=o[n]}catch(e){return false}if(typeof f!=='function')return false;try{f.call(o,v)}catch(e){queueMicrotask(()=>{throw e})}return true};",
    "const fail=(code,m,t)=>{if(settled)return;settled=true;const e={error:code,details:DLM(m)};",
    "if(!(t&&call('ontimeout',e))&&!call('onerror',e))console.error(e.details)};",
    "let url='';try{if(o.url!=null&&o.url!=='')url=new URL(String(o.url),location.href).href}catch(e){}",
    "if(!url){fail('not_succeeded','GM_download: no URL to download (details.url, or the first argument)');return{abort(){}}}",
    "const name=(()=>{try{if(o.name!=null){const t=String(o.name);if(t)return t}}catch(e){}return DLN(url)})();",
    // The script's own getters (`headers`, `timeout`, `onprogress`) may throw: that is a failure
    // told as every other one, `{error, details}`, not an exception at the caller.
    "let c;try{c=X({url,headers:o.headers,timeout:o.timeout,responseType:'blob',",
    "onprogress:typeof o.onprogress==='function'?p=>call('onprogress',p):undefined,",
    "onabort:()=>{if(settled)return;settled=true;call('onabort',{error:'not_succeeded',details:'GM_download: aborted by the script'})}},",
    "r=>{if(!r||r.error){fail(r&&r.connect?'not_whitelisted':'not_succeeded',r?r.error:'GM_download: no answer from the provider',r&&r.timeout);return}",
    "if(!(r.status>=200&&r.status<300)){fail('not_succeeded','GM_download: '+url+' answered '+r.status+(r.statusText?' '+r.statusText:'')+'; nothing was saved');return}",
    "if(typeof r.base64!=='string'){fail('not_succeeded','GM_download: the provider sent no file');return}",
    "DLQ(()=>{let u=null;try{const s=DL64(r.base64),n=s.length,y=new DLU(n);for(let i=0;i<n;i++)y[i]=s.charCodeAt(i);",
    "u=DLO(new DLB([y],{type:'application/octet-stream'}));const el=DLA(DLC,DLD,['http://www.w3.org/1999/xhtml','a']);",
    "DLA(DLS,el,['href',u]);DLA(DLS,el,['download',name]);DLA(DLK,el,[])}",
    "catch(e){fail('not_succeeded','GM_download: the file could not be saved: '+e);return}",
    "finally{if(u!==null)try{DLR(u)}catch(e){}}",
    "settled=true;call('onload',{finalUrl:r.finalUrl,name,status:r.status,statusText:r.statusText})})});",
    "}catch(e){fail('not_succeeded','GM_download: the request could not be made: '+e);return{abort(){}}}",
    "return{abort(){c.abort()}}};d('GM_download',DL);",
    // The promise form: resolves with what `onload` gets, rejects with what `onerror`,
    // `ontimeout` or `onabort` gets; the details' own callbacks are called too.
    "G.download=(a,b)=>{const o=DLP(a,b);let c;const pr=new Promise((ok,no)=>{",
    // The script's object is not copied (that would run its getters here, out of `DL`'s
    // reach): the callbacks are put on an object inheriting from it.
    "const f=(n,g)=>({value:x=>{g(x);let h;try{h=o[n]}catch(e){}if(typeof h==='function')h.call(o,x)}});",
    "c=DL(Object.create(o,{onload:f('onload',ok),onerror:f('onerror',no),ontimeout:f('ontimeout',no),onabort:f('onabort',no)}))});",
    "pr.abort=()=>c.abort();return pr};",
);

#[cfg(test)]
mod tests {
    #[test]
    fn one_line_and_only_its_own_names() {
        let js = super::DOWNLOAD_JS;
        assert!(!js.contains('\n') && !js.contains('\r'));
        assert!(js.contains("d('GM_download',DL)") && js.contains("G.download="));
        // No GM_xmlhttpRequest of its own: a script granted only GM_download does not get it.
        assert!(!js.contains("d('GM_xmlhttpRequest'") && !js.contains("G.xmlHttpRequest"));
        // Never in the document: no append, no insert.
        for put in ["append", "insert", "replaceWith", "innerHTML"] {
            assert!(!js.contains(put), "{put}");
        }
        // The whole GM line of a script granted it, to read or check with `node --check`.
        if let Ok(p) = std::env::var("LUMO_DUMP_DOWNLOAD") {
            let src = "// ==UserScript==\n// @name d\n// @grant GM_download\n// @grant GM_xmlhttpRequest\n// ==/UserScript==\n";
            let m = crate::scripts::metadata::parse(src).metadata.unwrap();
            std::fs::write(p, crate::gm::inject::prelude("u", &m, src)).unwrap();
        }
    }
}
