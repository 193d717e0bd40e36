//! The GM part of the code put around a script's source: the GM functions its `@grant`s name
//! ([`crate::gm::api::provided`]), and nothing for `@grant none` or no grant at all.
//!
//! One line, with no line break, so the source's own line numbers are unchanged in stack
//! traces. [`scoped`] is a function that puts the functions into an object it returns; the code
//! around the source binds them with `let` in a scope that encloses the source's function
//! (`scripts::prelude` for a registered script, `gm::try_gm` for a tried one). Never world
//! globals: Chrome may run a script in its shared world (more than 10 scripts on one page;
//! ARCHITECTURE.md, "One world per script"), where a global would be another script's, and the
//! try world outlives a try. A script that declares its own `GM_addStyle` fallback (`function
//! GM_addStyle…`, `let GM_info`) still compiles and its own definition wins, since its
//! declarations are in the inner function.

use serde_json::{json, Value};

use crate::gm::api;
use crate::scripts::metadata::{self, Metadata};

/// The handler's name in `GM_info.scriptHandler`.
pub const HANDLER: &str = "Lumo Userscripts";

/// What a script's GM code is made of, computed when its registration is: the functions that
/// need nothing from the worker (`head`), and the value functions it was granted, whose
/// snapshot of values is given when the code runs ([`scoped`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GmParts {
    pub head: String,
    pub value_names: Vec<&'static str>,
    /// Every name the code defines (`GM` included), for the code entry to bind.
    pub names: Vec<&'static str>,
}

impl GmParts {
    pub fn is_empty(&self) -> bool {
        self.head.is_empty() && self.value_names.is_empty()
    }

    /// Whether the values must be loaded for [`scoped`].
    pub fn needs_values(&self) -> bool {
        !self.value_names.is_empty()
    }
}

/// The GM parts for a script; empty when it is given no GM function.
pub fn parts(uuid: &str, meta: &Metadata, source: &str) -> GmParts {
    let given = api::provided(&meta.grants);
    let mut head = String::new();
    // Code two granted functions share goes in once, before the first of them.
    if given
        .iter()
        .any(|n| matches!(*n, "GM_addStyle" | "GM_addElement"))
    {
        head.push_str(PUT);
    }
    if given
        .iter()
        .any(|n| matches!(*n, "GM_xmlhttpRequest" | "GM_download"))
    {
        head.push_str(XHR_CORE_JS);
    }
    head.push_str(&absent_js(meta));
    let mut menu = false;
    for name in &given {
        if name.ends_with("MenuCommand") && std::mem::replace(&mut menu, true) {
            continue;
        }
        head.push_str(&api_js(name, uuid, meta, source));
    }
    // A name that is not a binding (`window.onurlchange` is the window's own property).
    let mut names: Vec<&'static str> = given.iter().copied().filter(|n| !n.contains('.')).collect();
    // Either menu function defines both (`gm::menu_js`).
    for pair in ["GM_registerMenuCommand", "GM_unregisterMenuCommand"] {
        if !names.contains(&pair)
            && given
                .iter()
                .any(|n| n.ends_with("MenuCommand") && *n != pair)
        {
            names.push(pair);
        }
    }
    if !given.is_empty() {
        names.push("GM");
    }
    GmParts {
        head,
        names,
        value_names: given
            .iter()
            .copied()
            .filter(|n| {
                n.strip_prefix("GM_")
                    .is_some_and(|n| VALUE_FUNCTIONS.contains(&n))
            })
            .collect(),
    }
}

/// The GM code of a script, one line: a function expression `(S0, V, NC) => GX` that
/// defines the granted functions (and `extra`, more code with `d` and `G` in scope:
/// `gm::resources::getters_js`) into `GX`, an object it returns, keyed by the names in
/// [`GmParts::names`]. `S0` is the channel (`(op, fields) => Promise`); `V` the script's values
/// snapshot, or `null` where it has no channel; `NC` the text that says so ([`no_channel_js`]),
/// the only copy in the registered code: an answer `{nochannel: true}` gets it as its error,
/// and every value function throws it when `V` is `null`. `""` when nothing is defined.
///
/// `platform` is the env's JSON text for `GM_info.platform` ([`platform_js`] keeps what of it
/// may go in).
pub fn scoped(parts: &GmParts, extra: &str, platform: &str) -> String {
    if parts.is_empty() && extra.is_empty() {
        return String::new();
    }
    let mut body = String::with_capacity(parts.head.len() + extra.len() + 64);
    body.push_str(&parts.head);
    body.push_str(&values_js("V", &parts.value_names));
    body.push_str(extra);
    // The `GM` object of promise forms (`GM.info` is a plain object there, as in
    // Violentmonkey).
    body.push_str("d('GM',G);");
    format!(
        "((S0,V,NC)=>{{const setTimeout=window.setTimeout,S=(o,f)=>Promise.resolve(S0(o,f)).then(r=>r&&r.nochannel?{{error:NC,nochannel:true}}:r),\
         GX=Object.create(null),d=(n,v)=>{{GX[n]=v}},G={{}},PF={};{body}return GX}})",
        platform_js(platform)
    )
}

/// `GM_info.platform` as a JS object literal, as Violentmonkey gives it (`arch`, `os` from
/// `chrome.runtime.getPlatformInfo`, `browserName`, `browserVersion` from the worker's
/// `navigator.userAgentData`: not what the tab's devtools emulate): the four strings of the
/// env's JSON text `raw`, each at most 64 characters, `""` for one missing or unreadable.
pub fn platform_js(raw: &str) -> String {
    let v: Value = serde_json::from_str(raw).unwrap_or(Value::Null);
    let field = |k: &str| {
        v.get(k)
            .and_then(Value::as_str)
            .filter(|s| s.len() <= 64)
            .unwrap_or_default()
            .to_owned()
    };
    json!({
        "arch": field("arch"),
        "browserName": field("browserName"),
        "browserVersion": field("browserVersion"),
        "os": field("os"),
    })
    .to_string()
}

/// For a script granted functions other managers give and this provider does not
/// (`api::Support::NotProvided`: `GM_cookie`, `GM_audio`…), one console warning when it runs,
/// naming them: they stay undefined, so a script's own feature test (`typeof GM_cookie`) still
/// reads them as absent, and a call's `ReferenceError` ("GM_cookie is not defined") has this
/// line above it in the page's console. Validation warns at each such `@grant` line too.
fn absent_js(meta: &Metadata) -> String {
    let mut names: Vec<&str> = Vec::new();
    for g in &meta.grants {
        if let api::Grant::Known(a) = api::classify(g) {
            // `window.close` and the like are the window's own, defined whatever is granted.
            if a.support == api::Support::NotProvided
                && g.starts_with("GM")
                && !names.contains(&g.as_str())
            {
                names.push(g.as_str());
            }
        }
    }
    if names.is_empty() {
        return String::new();
    }
    let text = format!(
        "[{}] {} {} granted but not provided by {HANDLER}: {} undefined in this script, and a \
         call to {} throws",
        meta.name,
        names.join(", "),
        if names.len() == 1 { "is" } else { "are" },
        if names.len() == 1 {
            "it is"
        } else {
            "they are"
        },
        if names.len() == 1 { "it" } else { "one" },
    );
    format!("console.warn({});", Value::String(text))
}

/// What a GM function that needs the worker answers in a world with no channel to it. Chrome
/// gives a document at most 10 user-script worlds; a script past the tenth runs in the shared
/// default world, configured without messaging (ARCHITECTURE.md, "One world per script").
pub const NO_CHANNEL: &str = "GM: no channel to the provider on this page. Chrome gives a page \
     at most 10 user-script worlds and this script ran past the tenth, in the shared world, where \
     values, requests, menu commands, tabs and notifications are not available (the first ten \
     scripts injected keep theirs)";

/// [`NO_CHANNEL`] as a JavaScript string literal.
pub fn no_channel_js() -> String {
    Value::String(NO_CHANNEL.to_owned()).to_string()
}

/// The GM code of a script without its `@resource` getters (tests, and the shape checks
/// below).
pub fn prelude(uuid: &str, meta: &Metadata, source: &str) -> String {
    scoped(&parts(uuid, meta, source), "", "")
}

fn api_js(name: &str, uuid: &str, meta: &Metadata, source: &str) -> String {
    match name {
        "GM_info" => format!(
            "const I={};I.platform=Object.freeze(PF);I.userAgent=navigator.userAgent;\
             Object.freeze(I.script);Object.freeze(I);d('GM_info',I);G.info=I;",
            info(uuid, meta, source)
        ),
        // At document-start there may be no <head> nor even <html> yet: the element is
        // returned at once and put in place as soon as the document has a root.
        "GM_addStyle" => "const AS=c=>{const s=PE('style');PA(PT,s,[String(c)]);return P(s,null,true)};\
             d('GM_addStyle',AS);G.addStyle=c=>PQ(AS(c));"
            .to_owned(),
        // Without a parent, where Violentmonkey puts it: `<head>` for what belongs there,
        // else `<body>` (a `<div>` in `<head>` is never shown), else the root.
        "GM_addElement" => "const E=(a,b,c)=>{let p=null,t=a,o=b;if(typeof a!=='string'){p=a;t=b;o=c}\
             t=String(t);const e=PE(t);\
             for(const[k,v]of Object.entries(o||{})){if(k==='textContent')PA(PT,e,[v]);\
             else PA(PS,e,[k,v])}return P(e,p,/^(script|style|link|meta)$/i.test(t))};d('GM_addElement',E);\
             G.addElement=(...a)=>PQ(E(...a));"
            .to_owned(),
        "GM_log" => format!(
            "const L=(...a)=>console.log({},...a);d('GM_log',L);G.log=(...a)=>Promise.resolve(L(...a));",
            Value::String(format!("[{}]", meta.name))
        ),
        "GM_xmlhttpRequest" => XHR_JS.to_owned(),
        "GM_download" => super::download_js::DOWNLOAD_JS.to_owned(),
        // Both defined by the first granted; `parts` puts it in once.
        "GM_registerMenuCommand" | "GM_unregisterMenuCommand" => super::menu_js::menu_js(),
        "GM_openInTab" => super::tabs_js::OPEN_IN_TAB_JS.to_owned(),
        "GM_notification" => super::tabs_js::NOTIFICATION_JS.to_owned(),
        "GM_setClipboard" => super::clipboard_js::SET_CLIPBOARD_JS.replace(
            "__MAXJ__",
            &super::clipboard::MAX_JSON_CHARS.to_string(),
        ),
        "GM_getTab" => super::tab_objects_js::GET_TAB_JS.to_owned(),
        "GM_saveTab" => super::tab_objects_js::save_tab_js(),
        "GM_getTabs" => super::tab_objects_js::GET_TABS_JS.to_owned(),
        // The world's own window: the page's DOM, not the page's JavaScript (validate_script
        // says so, see `gm::api::UNSAFE_WINDOW_NOTE`).
        "unsafeWindow" => "d('unsafeWindow',window);".to_owned(),
        "window.onurlchange" => URLCHANGE_JS.to_owned(),
        _ => String::new(),
    }
}

/// `X(o, W)`, the request under `GM_xmlhttpRequest` and `GM_download` (`gm::download_js`): the
/// worker performs it (`provider::gm`) and answers once; the callbacks get the fields scripts
/// read. A relative URL is resolved against the page here; the worker decides on the absolute
/// one. `abort()` drops the answer. `W`, when given, takes the worker's answer as it came
/// instead of `o`'s load and error callbacks (`GM_download` reads its `connect` flag and saves
/// the bytes itself). Put in once by `parts` for either grant; defines no GM name.
const XHR_CORE_JS: &str = concat!(
    // The body: text as given; bytes of an ArrayBuffer, typed array, DataView, Blob or FormData
    // base64-encoded with the type `Response` gives them (a FormData's boundary included);
    // URLSearchParams as text with the form type; anything else as its String().
    "const XB=d=>{if(d==null)return Promise.resolve({data:null});if(typeof d==='string')return Promise.resolve({data:d});",
    "if(d instanceof URLSearchParams)return Promise.resolve({data:String(d),type:'application/x-www-form-urlencoded;charset=UTF-8'});",
    "if(!(d instanceof ArrayBuffer||ArrayBuffer.isView(d)||d instanceof Blob||d instanceof FormData))return Promise.resolve({data:String(d)});",
    "const q=new Response(d);return q.arrayBuffer().then(a=>{const u=new Uint8Array(a);let s='';",
    "for(let i=0;i<u.length;i+=32768)s+=String.fromCharCode.apply(null,u.subarray(i,i+32768));",
    "return{data:btoa(s),binary:true,type:q.headers.get('content-type')}})};",
    // A `blob` answer is typed with the answer's Content-Type (the one `overrideMimeType`
    // names, if any), as XMLHttpRequest types it: scripts test `blob.type` or make a data URL.
    // `responseType: 'document'` is asked of the worker as text and parsed here, by the answer's
    // Content-Type (HTML when it names no type DOMParser reads), as Violentmonkey and
    // Tampermonkey give it; `responseXML` is that document, or for a text answer the XML one
    // parsed when first read (null unless its type is XML, as XMLHttpRequest's).
    "const XY=h=>{const m=/^content-type:[ \\t]*([^;\\r\\n]*)/im.exec(h||'');return m?m[1].trim().toLowerCase():''},XM=h=>{const c=XY(h);",
    "return/^(text\\/html|text\\/xml|application\\/xml|application\\/xhtml\\+xml|image\\/svg\\+xml)$/.test(c)?c:/[+\\/]xml$/.test(c)?'application/xml':''};",
    "const XD=(s,m)=>{try{return new DOMParser().parseFromString(s,m)}catch(e){return null}};",
    // A text answer in another charset than UTF-8 (the worker sends its bytes with the
    // `Content-Type`'s `charset`; `gm::xhr::response_json`), or one the script names in
    // `overrideMimeType` (then asked as bytes), is decoded here as `XMLHttpRequest` would: GBK,
    // Shift_JIS, windows-1251 pages read by scripts of those sites.
    "const XC=s=>{const m=/;\\s*charset\\s*=\\s*[\"']?([^\"';\\s]+)/i.exec(s||'');return m?m[1]:''};",
    "const XT=(b,c)=>{try{return new TextDecoder(c).decode(b)}catch(e){return new TextDecoder().decode(b)}};",
    // Headers the worker's `fetch` may not set (its forbidden request headers) and the browser
    // is not asked to (`gm::xhr::BROWSER_SET`: `Referer`, `Cookie`, `User-Agent` and `Origin` are):
    // not sent, and said once per name in the page's console.
    "const XW=new Set(),XF=h=>{for(const[k]of h){const n=k.toLowerCase();if(XW.has(n)||!/^(accept-charset|accept-encoding|access-control-request-(headers|method)|connection|content-length|cookie2|date|dnt|expect|host|keep-alive|set-cookie|te|trailer|transfer-encoding|upgrade|via|proxy-.*|sec-.*)$/.test(n))continue;",
    "XW.add(n);console.warn('GM_xmlhttpRequest: the '+k+' header cannot be set by this provider (its request is made with fetch, which does not send it; Referer, Cookie, User-Agent and Origin are sent); the request is sent without it')}};",
    "let XI=0;const X=(o,W)=>{o=o||{};const id=++XI;let done=false;",
    "const url=(()=>{try{return new URL(String(o.url),location.href).href}catch(e){return String(o.url)}})();",
    "const h=o.headers&&typeof o.headers==='object'?Object.entries(o.headers).map(([k,v])=>[String(k),String(v)]):[];XF(h);",
    // A callback's exception is thrown again in a microtask of its own: uncaught there, it is
    // the run's late error (`script_runs`), as an exception in the script's own timer is, and the
    // request's other callbacks still run. (So in every GM callback: listeners, menu commands,
    // tabs' onclose, downloads.)
    "const cb=(n,a)=>{try{if(typeof o[n]==='function')o[n].call(o,a)}catch(e){queueMicrotask(()=>{throw e})}};",
    "const ctrl={abort(){if(done)return;done=true;S('xhr.abort',{id});const e={readyState:4,status:0,statusText:'',finalUrl:url,responseHeaders:'',",
    "response:null,responseText:'',context:o.context};cb('onabort',e);cb('onloadend',e)}};",
    "const om=typeof o.overrideMimeType==='string'?o.overrideMimeType:'',oc=XC(om),",
    "rq=o.responseType==='document'?'':o.responseType||'',asb=oc&&(rq===''||rq==='text'||rq==='json');",
    // onprogress: a held watch per report (`gm::xhr_flight`), at most 4 a second so a long
    // download stays well inside the script's share of the channel.
    // onreadystatechange at 2 (the status and headers, from the watch's `head`: the worker's
    // answer before its body) and 3 (loading, at each report), as XMLHttpRequest's; an answer
    // that ends before the watch heard them has them fired, in order, just before 4. Without
    // `onprogress` the page asks only for a request not answered within 250 ms, and stops once
    // it has the head: at most one message more a request (none for a quick one), so a script
    // making many requests stays inside its GM window (`channel::rate`); its 3 comes just
    // before 4.
    "let seen=0,tries=0,hd=null,rs=1;const RS=(n,x)=>{rs=n;cb('onreadystatechange',Object.assign({readyState:n,response:null,responseText:'',context:o.context},hd,x))};",
    "const PW=()=>{if(done)return;S('xhr.progress',{id,seen}).then(r=>{if(done||!r||r.error)return;",
    "if(r.none){if(++tries<20)setTimeout(PW,100);return}",
    "if(r.head&&rs<2){const h=r.head;hd={status:h.status,statusText:h.statusText,finalUrl:h.finalUrl,responseHeaders:h.responseHeaders};RS(2)}",
    "if(r.seq!=null){seen=r.seq;if(r.loaded>0||!r.head){const p={loaded:r.loaded,total:r.total==null?0:r.total,lengthComputable:r.total!=null};",
    "cb('onprogress',Object.assign({readyState:3,context:o.context},p));if(hd)RS(3,p)}}",
    "if(typeof o.onprogress==='function'||!hd)setTimeout(PW,250)})};",
    "XB(o.data).then(b=>{if(done)return null;const q=S('xhr',{id,method:o.method||'GET',url,headers:h,data:b.data,binary:!!b.binary,dataType:b.type||null,",
    "responseType:asb?'arraybuffer':rq,timeout:o.timeout||0,anonymous:!!o.anonymous,user:o.user,password:o.password});",
    "cb('onloadstart',{readyState:1,status:0,finalUrl:url,context:o.context});if(typeof o.onprogress==='function')PW();else if(typeof o.onreadystatechange==='function')setTimeout(PW,250);return q},",
    "e=>({error:'GM_xmlhttpRequest: the data could not be read: '+e}))",
    ".then(r=>{if(done)return;done=true;if(W){W(r);return}",
    "if(!r||r.error){const e={readyState:4,status:0,statusText:'',finalUrl:url,responseHeaders:'',response:null,",
    "responseText:'',error:r?r.error:'GM_xmlhttpRequest: no answer from the provider',context:o.context};",
    "cb(r&&r.timeout?'ontimeout':'onerror',e);cb('onloadend',e);return}",
    "const t=o.responseType;let resp=r.text,rt=r.text;",
    "if(r.base64!=null){const b=Uint8Array.from(atob(r.base64),c=>c.charCodeAt(0));",
    "if(t==='blob'||t==='arraybuffer'){resp=t==='blob'?new Blob([b],{type:XY(om?'content-type: '+om:r.responseHeaders)}):b.buffer;rt=undefined}else resp=rt=XT(b,oc||r.charset||'utf-8')}",
    "const mt=om?XM('content-type: '+om):XM(r.responseHeaders);",
    "if(t==='json'){try{resp=JSON.parse(rt)}catch(e){resp=null}}",
    "else if(t==='document')resp=XD(rt,mt||'text/html');",
    "const x={readyState:4,status:r.status,statusText:r.statusText,finalUrl:r.finalUrl,responseHeaders:r.responseHeaders,",
    "response:resp,responseText:rt,context:o.context};",
    "if(t==='document')x.responseXML=resp;else if(rt!==undefined){let v;Object.defineProperty(x,'responseXML',{configurable:true,enumerable:true,",
    "get(){if(v===undefined)v=mt&&mt!=='text/html'?XD(rt,mt):null;return v}})}",
    "if(rs<2){hd={status:r.status,statusText:r.statusText,finalUrl:r.finalUrl,responseHeaders:r.responseHeaders};RS(2)}if(rs<3)RS(3);",
    "cb('onreadystatechange',x);cb('onload',x);cb('onloadend',x)});",
    "return ctrl};",
);

/// `GM_xmlhttpRequest` / `GM.xmlHttpRequest`: [`XHR_CORE_JS`]'s `X` under both names, and
/// `GM.xmlhttpRequest` as `X` itself (Violentmonkey maps a `GM.<name>` it has no promise form
/// of to `GM_<name>`, so scripts written for it call that spelling).
const XHR_JS: &str = concat!(
    "d('GM_xmlhttpRequest',X);G.xmlhttpRequest=X;",
    "G.xmlHttpRequest=o=>{let c;const pr=new Promise((ok,no)=>{const f=(n,g)=>x=>{g(x);if(o&&typeof o[n]==='function')o[n](x)};",
    "c=X(Object.assign({},o,{onload:f('onload',ok),onerror:f('onerror',no),ontimeout:f('ontimeout',no),onabort:f('onabort',no)}))});",
    "pr.abort=()=>c.abort();return pr};",
);

/// `window.onurlchange` and `window.addEventListener('urlchange', f)`, as Tampermonkey gives a
/// script granted `window.onurlchange`: called with `{type: 'urlchange', url}` (the new
/// `location.href`) each time the document's current history entry changes without a load —
/// `history.pushState`/`replaceState` (the same URL again included), a fragment change,
/// back/forward — which the Navigation API's `currententrychange` tells every world, the page's
/// own calls included (measured in Chromium 156, `gm.test.mjs`). `onurlchange` is `null` until
/// set, so a script's feature test (`window.onurlchange === null`) reads it given. Neither is a
/// DOM event: the listeners are kept here and called here, so the page's JavaScript neither
/// hears that a script listens nor fakes a change (a `urlchange` it dispatches on its window
/// reaches only its own listeners). `addEventListener`/`removeEventListener` are own properties
/// of this world's window that hand every other type to `EventTarget`'s, taken first.
pub const URLCHANGE_JS: &str = concat!(
    "{const W=window,RA=Reflect.apply,EA=EventTarget.prototype.addEventListener,ER=EventTarget.prototype.removeEventListener,",
    "L=[];let H=null,U=location.href;",
    "Object.defineProperty(W,'onurlchange',{configurable:true,enumerable:true,get:()=>H,set:v=>{H=typeof v==='function'?v:null}});",
    "const me=t=>t==null||t===W;",
    "W.addEventListener=function(t,f,o){if(!me(this)||t!=='urlchange')return RA(EA,this==null?W:this,arguments);",
    "if(f&&!L.some(x=>x.f===f))L.push({f,once:!!(o&&typeof o==='object'&&o.once)})};",
    "W.removeEventListener=function(t,f,o){if(!me(this)||t!=='urlchange')return RA(ER,this==null?W:this,arguments);",
    "const i=L.findIndex(x=>x.f===f);if(i>=0)L.splice(i,1)};",
    "const run=(f,e)=>{try{typeof f==='function'?RA(f,W,[e]):f&&typeof f.handleEvent==='function'&&f.handleEvent(e)}catch(x){queueMicrotask(()=>{throw x})}};",
    "const C=()=>{U=location.href;const e={type:'urlchange',url:U};if(H)run(H,e);",
    "for(const x of L.slice()){if(x.once){const i=L.indexOf(x);if(i>=0)L.splice(i,1)}run(x.f,e)}};",
    "if(W.navigation)RA(EA,W.navigation,['currententrychange',C]);",
    "else{RA(EA,W,['popstate',()=>{if(location.href!==U)C()}]);RA(EA,W,['hashchange',()=>{if(location.href!==U)C()}])}}",
);

/// `P(element, parent, head)`: appends to `parent`, else to `<head>` (`head`) or `<body>`, else
/// the root, waiting for one if the document has none yet; `PE(tag)` makes an HTML element.
/// `PQ(element)`: what `GM.addElement`/`GM.addStyle` return, the element itself (as
/// Violentmonkey's do: `GM.addStyle(css).remove()`) made thenable once (as Tampermonkey's
/// promise: `await GM.addElement(…)`, `.then(el => …)`, `.catch`, `.finally`). The first of
/// these removes all three, so the element the promise resolves to is not a thenable again
/// (else `await` would loop); a second `.then` on the same element is not one. They live in
/// the script's world only; `Promise` and its methods are taken before the script runs.
/// The DOM functions are taken when the GM code runs, before the script's source, which may
/// replace them (scripts hook `document.createElement` to watch what a page makes). Put in once
/// by `parts` for `GM_addStyle` and `GM_addElement`.
const PUT: &str = "const PA=Reflect.apply,PD=document,PG=(c,n)=>Object.getOwnPropertyDescriptor(c.prototype,n),\
     PC=Document.prototype.createElementNS,PN=Node.prototype.appendChild,PS=Element.prototype.setAttribute,\
     PT=PG(Node,'textContent').set,PH=PG(Document,'head').get,PB=PG(Document,'body').get,\
     PR=PG(Document,'documentElement').get,PM=MutationObserver,PO=PM.prototype.observe,PX=PM.prototype.disconnect,\
     PE=t=>PA(PC,PD,['http://www.w3.org/1999/xhtml',t]),PJ=Object.defineProperty,PK=Promise,\
     PL=PK.prototype.then,PY=PK.prototype.finally,PZ=PK.resolve,\
     PQ=e=>{if(!e)return e;const o=(n,f)=>PJ(e,n,{configurable:true,writable:true,value:f}),\
     x=()=>{delete e.then;delete e.catch;delete e.finally;return PA(PZ,PK,[e])};\
     o('then',(r,j)=>PA(PL,x(),[r,j]));o('catch',j=>PA(PL,x(),[void 0,j]));\
     o('finally',f=>PA(PY,x(),[f]));return e};\
     const P=((e,p,h)=>{const r=()=>p||(h?PA(PH,PD,[]):PA(PB,PD,[]))||PA(PR,PD,[]),\
     t=r();if(t)PA(PN,t,[e]);else{const m=new PM(()=>{const x=r();if(x){PA(PX,m,[]);\
     PA(PN,x,[e])}});PA(PO,m,[PD,{childList:true,subtree:true}])}return e});";

/// `GM_info` as a JS object literal (JSON is one): what Violentmonkey's carries that a script
/// reads.
fn info(uuid: &str, meta: &Metadata, source: &str) -> String {
    let run_at = match meta.run_at {
        metadata::RunAt::DocumentStart => "document-start",
        metadata::RunAt::DocumentEnd => "document-end",
        metadata::RunAt::DocumentIdle => "document-idle",
    };
    let resources: Vec<Value> = meta
        .resources
        .iter()
        .map(|(name, url)| json!({ "name": name, "url": url }))
        .collect();
    let mut script = json!({
        "name": meta.name,
        "namespace": meta.namespace.clone().unwrap_or_default(),
        "version": meta.version.clone().unwrap_or_default(),
        "description": meta.description.clone().unwrap_or_default(),
        "matches": meta.matches,
        "excludeMatches": meta.exclude_matches,
        "includes": meta.include_globs,
        "excludes": meta.exclude_globs,
        "runAt": run_at,
        "run-at": run_at,
        "noframes": meta.no_frames,
        "grant": meta.grants,
        "connects": meta.connects,
        "require": meta.requires,
        "resources": resources,
    });
    // The header's links, under the names Violentmonkey and Tampermonkey give them (for
    // "report a bug" links, about boxes), each from the first of its spellings the header has.
    let first = |keys: &[&str]| {
        keys.iter()
            .find_map(|k| meta.other.iter().find(|(key, _)| key == k))
            .map(|(_, v)| Value::String(v.clone()))
    };
    if let Some(o) = script.as_object_mut() {
        let homepage = first(&["homepageURL", "homepage", "website", "source"]);
        for (name, value) in [
            ("author", first(&["author"])),
            ("icon", first(&["icon", "iconURL", "defaulticon"])),
            ("homepage", homepage.clone()),
            ("homepageURL", homepage),
            ("supportURL", first(&["supportURL"])),
            ("updateURL", first(&["updateURL"])),
            ("downloadURL", first(&["downloadURL"])),
        ] {
            if let Some(v) = value {
                o.insert(name.to_owned(), v);
            }
        }
    }
    json!({
        "uuid": uuid,
        "scriptHandler": HANDLER,
        "version": env!("CARGO_PKG_VERSION"),
        "injectInto": "content",
        "scriptMetaStr": meta_block(source),
        "script": script,
    })
    .to_string()
}

/// The text of the `// ==UserScript==` … `// ==/UserScript==` block the parser read, markers
/// included; `""` when there is none (the parser accepted the script, so there is).
fn meta_block(source: &str) -> &str {
    metadata::block_span(source)
        .and_then(|r| source.get(r))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta_of(src: &str) -> Metadata {
        metadata::parse(src).metadata.unwrap()
    }

    fn src(grants: &[&str]) -> String {
        let mut s =
            String::from("// ==UserScript==\n// @name P \"q\"\n// @match https://a.example/*\n");
        for g in grants {
            s.push_str(&format!("// @grant {g}\n"));
        }
        s.push_str("// ==/UserScript==\nbody();\n");
        s
    }

    #[test]
    fn none_and_no_grant_give_nothing() {
        for g in [&[][..], &["none"][..]] {
            let s = src(g);
            assert_eq!(prelude("u", &meta_of(&s), &s), "", "{g:?}");
        }
        // A grant this provider does not give (or a typo) still gives what every manager
        // gives without one (`api::WITHOUT_GRANT`), and nothing else.
        for g in [&["GM_bogus"][..], &["GM_cookie"][..]] {
            let s = src(g);
            let p = prelude("u", &meta_of(&s), &s);
            assert!(
                p.contains("d('GM_info'") && p.contains("d('unsafeWindow',window)"),
                "{g:?}: {p}"
            );
            assert!(!p.contains("d('GM_cookie'") && !p.contains("d('GM_bogus'"));
        }
    }

    /// The worker reads no `document` answers (`gm::message` refuses the type): the page asks
    /// for text and parses it, so a script's `responseType: 'document'` gets a Document
    /// (`compat.test.mjs`, "embed"), and `responseXML` is defined.
    #[test]
    fn a_document_answer_is_asked_as_text_and_parsed_in_the_page() {
        let s = src(&["GM_xmlhttpRequest"]);
        let p = prelude("u", &meta_of(&s), &s);
        assert!(p.contains("rq=o.responseType==='document'?'':o.responseType||''"));
        assert!(p.contains("responseType:asb?'arraybuffer':rq"));
        assert!(p.contains("new DOMParser().parseFromString(s,m)"));
        assert!(p.contains("x.responseXML=resp") && p.contains("'responseXML'"));
        assert!(!p.contains('\n'));
    }

    /// `GM_download` rides on the request code of `GM_xmlhttpRequest` without giving the script
    /// `GM_xmlhttpRequest`; granted together, that code is put in once.
    #[test]
    fn download_brings_the_request_code_but_not_gm_xmlhttprequest() {
        let count = |p: &str, s: &str| p.matches(s).count();
        for g in ["GM_download", "GM.download"] {
            let s = src(&[g]);
            let p = prelude("u", &meta_of(&s), &s);
            assert_eq!(count(&p, "const X=(o,W)=>"), 1, "{g}: {p}");
            assert_eq!(count(&p, "d('GM_download',"), 1, "{g}");
            assert!(p.contains("G.download="), "{g}");
            assert!(!p.contains("d('GM_xmlhttpRequest'") && !p.contains("G.xmlHttpRequest"));
            assert!(!p.contains('\n'));
        }
        let s = src(&["GM_download", "GM_xmlhttpRequest"]);
        let p = prelude("u", &meta_of(&s), &s);
        assert_eq!(count(&p, "const X=(o,W)=>"), 1, "{p}");
        assert!(p.find("const X=") < p.find("d('GM_xmlhttpRequest'"));
        assert!(p.find("const X=") < p.find("d('GM_download'"));
        let s = src(&["GM_addStyle"]);
        assert!(!prelude("u", &meta_of(&s), &s).contains("const X="));
    }

    #[test]
    fn only_granted_functions_are_defined_on_one_line() {
        let s = src(&["GM_addStyle"]);
        let p = prelude("u", &meta_of(&s), &s);
        assert!(p.contains("d('GM_addStyle'"));
        assert!(!p.contains("GM_addElement") && !p.contains("GM_log"));
        assert!(!p.contains('\n') && !p.contains('\r'));
        let s = src(&["GM.info", "GM_addElement", "unsafeWindow", "GM_log"]);
        let p = prelude("uuid-1", &meta_of(&s), &s);
        for want in [
            "d('GM_info'",
            "d('GM_addElement'",
            "d('unsafeWindow',window)",
            "d('GM_log'",
            "d('GM',G)",
        ] {
            assert!(p.contains(want), "{want}: {p}");
        }
        assert!(!p.contains('\n'));
    }

    #[test]
    fn code_two_functions_share_is_put_in_once() {
        let count = |p: &str, s: &str| p.matches(s).count();
        let s = src(&[
            "GM_addStyle",
            "GM.addElement",
            "GM_registerMenuCommand",
            "GM.unregisterMenuCommand",
        ]);
        let p = prelude("u", &meta_of(&s), &s);
        assert_eq!(count(&p, "const P="), 1, "{p}");
        assert_eq!(count(&p, "const MR="), 1, "{p}");
        assert!(p.find("const P=") < p.find("const AS="));
        for want in [
            "d('GM_addStyle'",
            "d('GM_addElement'",
            "d('GM_registerMenuCommand'",
            "d('GM_unregisterMenuCommand'",
        ] {
            assert_eq!(count(&p, want), 1, "{want}");
        }
        // One of each pair still brings what it needs.
        for (grant, want) in [
            ("GM_addElement", "const P="),
            ("GM_unregisterMenuCommand", "const MR="),
        ] {
            let s = src(&[grant]);
            assert_eq!(count(&prelude("u", &meta_of(&s), &s), want), 1, "{grant}");
        }
        let s = src(&["GM_log"]);
        assert!(!prelude("u", &meta_of(&s), &s).contains("const P="));
    }

    /// A granted function this provider does not give stays undefined (a script's `typeof`
    /// test must still see it absent) and is named in one console warning; `window.close`,
    /// the window's own, is not.
    #[test]
    fn absent_grants_are_named_in_a_warning_and_stay_undefined() {
        let s = src(&[
            "GM_cookie",
            "GM.audio",
            "GM_cookie",
            "window.close",
            "GM_addStyle",
        ]);
        let p = prelude("u", &meta_of(&s), &s);
        assert_eq!(p.matches("console.warn(").count(), 1, "{p}");
        assert!(p.contains("GM_cookie, GM.audio are granted but not provided by Lumo Userscripts"));
        assert!(p.contains("GM.audio are granted") && !p.contains("window.close are"));
        assert!(
            !p.contains("d('GM_cookie'") && !p.contains("G.cookie"),
            "{p}"
        );
        let s = src(&["window.close", "GM_addStyle"]);
        assert!(!prelude("u", &meta_of(&s), &s).contains("console.warn("));
    }

    #[test]
    fn info_carries_the_metadata_as_json() {
        let s = src(&["GM_info"]);
        let p = prelude("uuid-1", &meta_of(&s), &s);
        let start = p.find("const I=").unwrap() + "const I=".len();
        let end = p.find(";I.platform=").unwrap();
        let v: Value = serde_json::from_str(&p[start..end]).unwrap();
        assert_eq!(v["script"]["name"], "P \"q\"");
        assert_eq!(v["scriptHandler"], HANDLER);
        assert_eq!(v["uuid"], "uuid-1");
        assert_eq!(v["script"]["grant"], json!(["GM_info"]));
        assert!(v["scriptMetaStr"]
            .as_str()
            .unwrap()
            .starts_with("// ==UserScript=="));
        assert!(v["scriptMetaStr"]
            .as_str()
            .unwrap()
            .ends_with("// ==/UserScript=="));
    }

    /// The block the parser read, not the first text that names a marker: a banner before it,
    /// a description quoting the closing marker, a BOM.
    #[test]
    fn script_meta_str_is_the_block_the_parser_read() {
        let header = "// ==UserScript==\r\n// @name B\r\n// @description Paste between // ==UserScript== and // ==/UserScript== lines\r\n// @match https://a.example/*\r\n// @grant GM_info\r\n// ==/UserScript==";
        let s = format!("\u{feff}/* A userscript: install it in a ==UserScript== manager */\r\n{header}\r\nbody();\r\n");
        assert_eq!(meta_block(&s), header);
        let p = prelude("uuid-1", &meta_of(&s), &s);
        let start = p.find("const I=").unwrap() + "const I=".len();
        let end = p.find(";I.platform=").unwrap();
        let v: Value = serde_json::from_str(&p[start..end]).unwrap();
        assert_eq!(v["scriptMetaStr"], header);
        assert_eq!(meta_block("no header"), "");
    }

    /// The header's links, as Violentmonkey's and Tampermonkey's `GM_info.script` give them;
    /// absent when the header has none.
    #[test]
    fn info_carries_the_headers_links() {
        let info_of = |s: &str| -> Value {
            let p = prelude("u", &meta_of(s), s);
            let start = p.find("const I=").unwrap() + "const I=".len();
            let end = p.find(";I.platform=").unwrap();
            serde_json::from_str(&p[start..end]).unwrap()
        };
        let s = src(&["GM_info"]).replace(
            "// ==/UserScript==",
            "// @author Ann\n// @website https://w.example/\n// @homepageURL https://h.example/\n\
             // @iconURL https://i.example/i.png\n// @supportURL https://s.example/issues\n\
             // @updateURL https://u.example/p.meta.js\n// @downloadURL https://u.example/p.user.js\n\
             // @run-at document-start\n// ==/UserScript==",
        );
        let v = info_of(&s)["script"].clone();
        assert_eq!(v["author"], "Ann");
        assert_eq!(v["homepage"], "https://h.example/");
        assert_eq!(v["homepageURL"], "https://h.example/");
        assert_eq!(v["icon"], "https://i.example/i.png");
        assert_eq!(v["supportURL"], "https://s.example/issues");
        assert_eq!(v["updateURL"], "https://u.example/p.meta.js");
        assert_eq!(v["downloadURL"], "https://u.example/p.user.js");
        assert_eq!(v["runAt"], "document-start");
        assert_eq!(v["run-at"], "document-start");
        let bare = info_of(&src(&["GM_info"]))["script"].clone();
        for k in [
            "author",
            "homepage",
            "icon",
            "supportURL",
            "updateURL",
            "downloadURL",
        ] {
            assert!(bare.get(k).is_none(), "{k}: {bare}");
        }
    }

    #[test]
    fn urlchange_is_given_only_when_granted_and_binds_no_name() {
        let s = src(&["window.onurlchange"]);
        let p = parts("u", &meta_of(&s), &s);
        assert!(p.head.contains(URLCHANGE_JS));
        assert!(p.names.iter().all(|n| !n.contains('.')), "{:?}", p.names);
        assert!(!p.head.contains("granted but not provided"));
        let s = src(&["GM_addStyle"]);
        assert!(!parts("u", &meta_of(&s), &s).head.contains("onurlchange"));
        assert!(!URLCHANGE_JS.contains('\n'));
    }

    #[test]
    fn platform_keeps_four_short_strings() {
        let p = |raw: &str| serde_json::from_str::<Value>(&platform_js(raw)).unwrap();
        assert_eq!(
            p(
                r#"{"os":"linux","arch":"x86-64","browserName":"Google Chrome","browserVersion":"156.0.1.2","x":"y"}"#
            ),
            json!({"os":"linux","arch":"x86-64","browserName":"Google Chrome","browserVersion":"156.0.1.2"})
        );
        let empty = json!({"os":"","arch":"","browserName":"","browserVersion":""});
        for raw in ["", "null", "[1]", "{\"os\":5}", "not json"] {
            assert_eq!(p(raw), empty, "{raw}");
        }
        let long = format!(
            "{{\"os\":\"{}\",\"arch\":\"</script>\\u2028\"}}",
            "a".repeat(65)
        );
        assert_eq!(p(&long)["os"], "");
        // One string in the code (`one_line` escapes U+2028 where it is registered).
        let s = src(&["GM_info"]);
        let code = scoped(&parts("u", &meta_of(&s), &s), "", &long);
        assert!(
            code.contains("PF={\"arch\":\"</script>\u{2028}\""),
            "{code}"
        );
        assert!(code.contains("I.platform=Object.freeze(PF)"));
    }
}

/// The value functions (`GM_getValue` … and their `GM.*` forms), for a script granted any of
/// them. Needs, in scope: `S(op, fields)` → a promise of the worker's reply (the channel, its
/// token in a closure), `d` and `G` (see [`scoped`]). `snap` is an expression for the script's
/// values when it was registered (`null` where it has no channel: each function then throws
/// [`NO_CHANNEL`]), so `GM_getValue` answers synchronously from the first statement, at every
/// `@run-at`. A change updates this world's copy at once and is sent in one batch per task
/// (a loop of 10,000 `GM_setValue`s is one message with the last value of each key); the
/// script's own bounds are checked here first, so `GM_setValue` throws at once when one is
/// passed, and the worker checks them all again (and the total) before it stores anything.
pub fn values_js(snap: &str, given: &[&str]) -> String {
    let names: Vec<&str> = given
        .iter()
        .filter_map(|n| n.strip_prefix("GM_"))
        .filter(|n| VALUE_FUNCTIONS.contains(n))
        .collect();
    if names.is_empty() {
        return String::new();
    }
    VALUES_JS
        .replace("__GIVEN__", &serde_json::json!(names).to_string())
        .replace("__MAXB__", &crate::gm::values::MAX_SCRIPT_BYTES.to_string())
        .replace("__MAXK__", &crate::gm::values::MAX_KEYS.to_string())
        .replace("__MAXKB__", &crate::gm::values::MAX_KEY_BYTES.to_string())
        // Last: the snapshot is the script's own data, which no placeholder may touch.
        .replace("__SNAP__", snap)
}

/// The value functions, without their `GM_` prefix.
const VALUE_FUNCTIONS: &[&str] = &[
    "getValue",
    "setValue",
    "deleteValue",
    "listValues",
    "getValues",
    "setValues",
    "deleteValues",
    "addValueChangeListener",
    "removeValueChangeListener",
];

const VALUES_JS: &str = concat!(
    // No snapshot: no channel (`NO_CHANNEL`); every value function says so.
    "{const V0=__SNAP__;if(V0===null){for(const n of __GIVEN__){const f=()=>{throw new Error(NC)};d('GM_'+n,f);",
    "G[n]=()=>Promise.reject(new Error(NC))}}else{",
    "const C=Object.assign(Object.create(null),V0),L=new Map(),enc=new TextEncoder(),",
    "len=s=>enc.encode(s).length,par=t=>{try{return JSON.parse(t)}catch(e){return undefined}};",
    // `fly`: keys sent and not yet answered (how many times); `mine`: the number of this page's
    // last stored change of each key (`gm::change_log`); `held`: another page's change heard
    // while this page's own change of that key was unsent or unanswered, decided at its answer.
    "let lid=0,pend=null,wait=[],busy=0,leaving=false,noop=0;const fly=new Map(),mine=new Map(),held=new Map();",
    "const fire=(k,o,n,r)=>{for(const l of L.values())if(l.k===k)try{l.f(k,o===undefined?undefined:par(o),",
    "n===undefined?undefined:par(n),r)}catch(e){queueMicrotask(()=>{throw e})}};",
    // One batch at a time (the worker may take two messages of one page in either order), but
    // as the page is left whatever waits goes at once.
    "const flush=()=>{const p=pend;if(!p||(busy&&!leaving))return;pend=null;const w=wait;wait=[];const set=[],del=[];",
    "for(const[k,t]of p){fly.set(k,(fly.get(k)||0)+1);t===undefined?del.push(k):set.push([k,t])}",
    "const q=[];if(del.length)q.push([del,S('values.delete',{keys:del})]);",
    "if(set.length)q.push([set.map(x=>x[0]),S('values.set',{items:set})]);busy++;",
    "Promise.allSettled(q.map(x=>x[1])).then(rs=>{busy--;let bad=null;rs.forEach((o,i)=>{const r=o.status==='fulfilled'?o.value:null;",
    "settle(q[i][0],r);if(r&&r.rate)resync();if(!r||r.error)bad=bad||r&&r.error||o.reason&&o.reason.message||'GM values: the provider did not answer; the change may not have been saved'});",
    "if(bad){console.error(bad);for(const x of w)x[1](new Error(bad))}else for(const x of w)x[0]();if(pend)soon()})};",
    // A key's own change answered: its number is this page's, and a change another page made
    // meanwhile is taken only if the worker stored it later.
    // A refused change: the page's copy of each key goes back to what is stored (`kept`,
    // [key, text|null] pairs), unless a later change of it is on its way.
    "const settle=(keys,r)=>{const n=r&&!r.error&&typeof r.n==='number'?r.n:0;",
    "const kept=r&&r.error&&Array.isArray(r.kept)?new Map(r.kept.filter(x=>Array.isArray(x)&&typeof x[0]==='string')):null;",
    "for(const k of keys){",
    "const c=(fly.get(k)||1)-1;c?fly.set(k,c):fly.delete(k);if(n>(mine.get(k)||0))mine.set(k,n);",
    // `kept` was read after any change held here, so it wins over one (R14).
    "const h=held.get(k),idle=!fly.has(k)&&!(pend&&pend.has(k));",
    "if(kept&&idle&&kept.has(k)){held.delete(k);const t=kept.get(k);remote(k,typeof t==='string'?t:undefined)}",
    "else if(h&&idle){held.delete(k);if(h.n>(mine.get(k)||0))remote(k,h.t)}}};",
    // A change goes in a task of its own, after the one that made it: a message, not a timer,
    // which Chrome delays up to a minute in a hidden tab. What is waiting goes at once when the
    // page is hidden or left (a tab closed: no later task runs), and a change made from then
    // on, in a `pagehide` listener of the script's (ours are the world's first), at the end of
    // that very event.
    "const bye=e=>{if(e.isTrusted){leaving=true;flush()}};addEventListener('pagehide',bye);",
    "const mc=new MessageChannel();mc.port1.onmessage=()=>flush();",
    "const soon=()=>leaving?queueMicrotask(flush):mc.port2.postMessage(0);",
    // The bytes and keys held, counted at the first change, not as the page starts (every
    // value's UTF-8 encoded: 0.4 ms and 200 KB of garbage for 200 KB of values, on each load).
    "let B=-1,N=0;const tally=()=>{if(B<0){B=0;for(const k in C){N++;B+=len(k)+len(C[k])}}};",
    "const put=items=>{tally();const last=new Map();for(const[k,t]of items){",
    "if(len(k)>__MAXKB__)throw new Error('GM_setValue: a key longer than __MAXKB__ bytes');last.set(k,t)}",
    "let b=B,n=N;for(const[k,t]of last){const o=C[k];if(o!==undefined){b-=len(k)+len(o);n--}if(t!==undefined){b+=len(k)+len(t);n++}}",
    "if(b>__MAXB__)throw new Error('GM_setValue refused: this script\\'s values would take '+b+' bytes, over its limit of __MAXB__; nothing was changed');",
    "if(n>__MAXK__)throw new Error('GM_setValue refused: this script would hold '+n+' keys, over the limit of __MAXK__; nothing was changed');",
    // A value equal to this page's copy changes nothing here and fires no listener, but the
    // copy may be behind another tab's change (nothing pushes them here), so it is sent too:
    // at most once a second, so a script setting the same value in a loop or on every event
    // does not spend its GM window on it.
    "B=b;N=n;const again=Date.now()-noop>=1000;for(const[k,t]of last){const o=C[k];",
    "if(o===t){if(!again)continue;noop=Date.now()}else if(t===undefined)delete C[k];else C[k]=t;",
    "if(!pend){pend=new Map();soon()}pend.set(k,t);if(dirty)dirty.add(k);if(o!==t)fire(k,o,t,false)}",
    "};",
    "let polling=false,pg=0;const remote=(k,t)=>{const o=C[k];if(o===t)return;tally();if(o!==undefined){B-=len(k)+len(o);N--}",
    "if(t!==undefined){B+=len(k)+len(t);N++;C[k]=t}else delete C[k];fire(k,o,t,true)};",
    // Another page's change, numbered: held while this page's own change of the key is on its
    // way, dropped when older than this page's stored one.
    "const heard=(k,t,n)=>{if(typeof n!=='number')n=0;if(fly.has(k)||(pend&&pend.has(k))){const h=held.get(k);",
    "if(!h||n>=h.n)held.set(k,{t,n});return}if(n&&n<(mine.get(k)||0))return;remote(k,t)};",
    // A listener's wait carries the cursor of its last answer, so what changed before it asks
    // again is answered at once; told to read the values whole (its first wait, a restarted
    // worker, a restore), it does once nothing of its own is unsent or unanswered. A page back
    // from the back/forward cache starts a new loop (`pg`): its old wait may never be answered.
    // A wait answered within a second asks again only a second after it was sent: pages that
    // change a value many times a second cost each listening page one wait a second (R15:
    // three tabs' heartbeats spent the script's requests, and its values were refused).
    "let cur=null;const poll=g=>{if(g!==pg)return;const at=Date.now();S('values.wait',{since:cur}).then(r=>{if(g!==pg)return;",
    "if(r&&r.resync){if(!refresh(x=>{if(g!==pg)return;if(x&&typeof x.cursor==='number')cur=x.cursor;",
    "setTimeout(()=>poll(g),x&&!x.error?0:2000)}))setTimeout(()=>poll(g),1000);return}",
    "if(r&&Array.isArray(r.changes))for(const c of r.changes)",
    "if(Array.isArray(c)&&typeof c[0]==='string')heard(c[0],typeof c[2]==='string'?c[2]:undefined,c[3]);",
    "if(r&&typeof r.cursor==='number')cur=r.cursor;setTimeout(()=>poll(g),r&&!r.error?Math.max(0,1000-(Date.now()-at)):2000)},",
    "()=>{if(g===pg)setTimeout(()=>poll(g),2000)})};",
    // Without a listener nothing waits in the worker (which would keep it running): this
    // page's copy is asked for again when the page is shown again, and as it is read while
    // shown, at most every 5 s (12 messages a minute of the script's 600 per visible page, so
    // many background tabs cannot spend its window). A listener's waits keep the copy exact
    // instead (`then`: the read its wait asked for). Keys this page changed meanwhile, or has
    // not yet sent, keep this page's value.
    "let synced=Date.now(),dirty=null;",
    "const refresh=then=>{if(dirty||pend||busy||(polling&&!then))return false;synced=Date.now();dirty=new Set();",
    "S('values.get',{}).then(r=>{const dk=dirty;dirty=null;const got=r&&!r.error&&r.values;if(got&&typeof got==='object'){",
    "for(const k of Object.keys(C))if(!dk.has(k)&&!Object.prototype.hasOwnProperty.call(got,k))remote(k,undefined);",
    "for(const k of Object.keys(got))if(!dk.has(k)&&typeof got[k]==='string')remote(k,got[k])}if(then)then(r)},",
    "()=>{dirty=null;if(then)then(null)});return true};",
    // A change refused for the script's request rate left this page's copy ahead of what is
    // stored: it is read again once the rate allows (and again while it does not).
    "let rsy=0;const resync=()=>{if(rsy)return;rsy=setTimeout(()=>{rsy=0;if(!refresh(x=>{if(!x||x.error)resync()}))resync()},10000)};",
    "const stale=()=>{if(document.visibilityState==='visible'&&Date.now()-synced>5000)refresh()},shown=e=>{if(e.isTrusted&&Date.now()-synced>1000)refresh()};",
    // One listener: hidden, what waits goes at once; shown again, the copy is asked for.
    "document.addEventListener('visibilitychange',e=>{if(document.visibilityState==='hidden'){if(e.isTrusted)flush()}else shown(e)});",
    "addEventListener('focus',e=>{if(e.target===window)shown(e)});",
    "addEventListener('pageshow',e=>{leaving=false;if(e.persisted){shown(e);if(polling&&e.isTrusted)poll(++pg)}});",
    "const text=v=>{const t=JSON.stringify(v);return t};",
    "const get=(k,dv)=>{stale();k=String(k);return k in C?par(C[k]):dv};",
    "const set=(k,v)=>{put([[String(k),text(v)]])};",
    "const api={getValue:get,setValue:set,deleteValue:k=>{put([[String(k),undefined]])},",
    "listValues:()=>{stale();return Object.keys(C)},",
    "getValues:ks=>{stale();const o={};if(Array.isArray(ks)){for(const k of ks)if(String(k)in C)o[k]=par(C[String(k)])}",
    "else if(ks&&typeof ks==='object'){for(const k of Object.keys(ks))o[k]=String(k)in C?par(C[k]):ks[k]}return o},",
    "setValues:o=>{put(Object.keys(o||{}).map(k=>[k,text(o[k])]))},",
    "deleteValues:ks=>{put((ks||[]).map(k=>[String(k),undefined]))},",
    "addValueChangeListener:(k,f)=>{const id=++lid;L.set(id,{k:String(k),f});if(!polling){polling=true;poll(pg)}return id},",
    "removeValueChangeListener:id=>{L.delete(id)}};",
    "for(const n of __GIVEN__){const f=api[n];d('GM_'+n,f);",
    "G[n]=(...a)=>{try{const r=f(...a);return pend&&/^(set|delete)/.test(n)?new Promise((ok,no)=>wait.push([()=>ok(r),no])):Promise.resolve(r)}catch(e){return Promise.reject(e)}}}",
    "}}",
);

#[cfg(test)]
mod values_tests {
    use super::*;
    use crate::gm::values::{Op, Values};

    #[test]
    fn a_value_that_spells_a_placeholder_is_kept_as_it_is() {
        let mut v = Values::default();
        let raw = "\"__MAXB__ __MAXK__ __MAXKB__ __GIVEN__\"";
        v.apply(&Op::Set(vec![("k".into(), raw.into())]), 0)
            .unwrap();
        let js = values_js(&v.encode().to_string(), &["GM_getValue"]);
        assert!(js.contains("__MAXB__ __MAXK__ __MAXKB__ __GIVEN__"), "{js}");
    }

    #[test]
    fn values_js_defines_only_granted_value_functions() {
        let mut v = Values::default();
        v.apply(
            &Op::Set(vec![("k".into(), "\"</script>\\u2028\"".into())]),
            0,
        )
        .unwrap();
        assert_eq!(values_js(&v.encode().to_string(), &["GM_addStyle"]), "");
        let js = values_js(
            &v.encode().to_string(),
            &["GM_getValue", "GM_setValue", "GM_info"],
        );
        assert!(js.contains(r#"["getValue","setValue"]"#), "{js}");
        assert!(!js.contains('\n') && !js.contains("__"));
        if let Ok(path) = std::env::var("LUMO_DUMP_VALUES_JS") {
            std::fs::write(path, &js).unwrap();
        }
    }
}
