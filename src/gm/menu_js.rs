//! The page side of `GM_registerMenuCommand` / `GM_unregisterMenuCommand` (and their `GM.*`
//! forms), put in the prelude once by `gm::inject` when either is granted (both are then
//! defined: one without the other is of no use). Needs `S`, `d`, `G` in scope (see
//! `inject::scoped`).
//!
//! The page keeps its commands (id → caption, access key, function) and, while it has any,
//! holds one `menu` request open with its whole list (`provider::gm_menu`): the answer is a
//! click (run the function, ask again), a newer list's arrival (ignored: each request carries a
//! generation), the tab's closing (stop), or a timeout (ask again). An error (the worker
//! restarted, the channel was busy, the page went into the back/forward cache) is retried after
//! a pause, which restores the list; a page restored from the cache asks again at once
//! (`pageshow`, trusted only: a page's own event would just cost a message).
//! As in Violentmonkey, the id is `options.id` or else the caption, and registering an id again
//! replaces its command.

use super::menu::MAX_COMMANDS;

pub fn menu_js() -> String {
    MENU_JS.replace("__MAXC__", &MAX_COMMANDS.to_string())
}

const MENU_JS: &str = concat!(
    "{let MG=0,MQ=false;const M=new Map();",
    "const MW=()=>{const g=++MG;const cs=[...M].map(([i,c])=>[i,c.c,c.k]);",
    "S('menu',{commands:cs}).then(r=>{if(g!==MG)return;",
    "if(r&&typeof r.click==='string'){const c=M.get(r.click);if(c)try{c.f.call(null,{type:'click',button:0,",
    "shiftKey:false,ctrlKey:false,altKey:false,metaKey:false})}catch(e){queueMicrotask(()=>{throw e})}if(g!==MG)return}",
    "if(r&&(r.gone||r.nochannel))return;if(M.size)setTimeout(MW,r&&!r.error?0:5000)},",
    "()=>{if(g===MG&&M.size)setTimeout(MW,5000)})};",
    "const MS=()=>{if(MQ)return;MQ=true;setTimeout(()=>{MQ=false;MW()},0)};",
    // The id given back is the one the script gave (a number stays one); kept as its text.
    "const MR=(cap,f,o)=>{cap=String(cap).slice(0,500);let k=null,id=cap,ret=cap;",
    "if(typeof o==='string')k=o;else if(o&&typeof o==='object'){if(o.id!=null){id=String(o.id);ret=o.id}",
    "if(typeof o.accessKey==='string')k=o.accessKey}",
    "if(typeof f!=='function')throw new TypeError('GM_registerMenuCommand: the second argument must be a function');",
    "if(id.length>128)throw new Error('GM_registerMenuCommand: an id longer than 128 characters');",
    "if(!M.has(id)&&M.size>=__MAXC__)throw new Error('GM_registerMenuCommand: at most __MAXC__ commands per script in a page');",
    "M.delete(id);M.set(id,{c:cap,f,k});MS();return ret};",
    "const MU=id=>{if(M.delete(String(id)))MS()};",
    "d('GM_registerMenuCommand',MR);d('GM_unregisterMenuCommand',MU);",
    "G.registerMenuCommand=(...a)=>{try{return Promise.resolve(MR(...a))}catch(e){return Promise.reject(e)}};",
    // The id may be `GM.registerMenuCommand`'s promise (Violentmonkey returns the id at once).
    "G.unregisterMenuCommand=id=>Promise.resolve(id).then(MU);",
    "addEventListener('pageshow',e=>{if(e.persisted&&e.isTrusted&&M.size)MW()})}",
);

#[cfg(test)]
mod tests {
    #[test]
    fn one_line_and_bounded() {
        let js = super::menu_js();
        assert!(!js.contains('\n') && !js.contains("__"));
        assert!(js.contains(&format!(">={}", super::MAX_COMMANDS)));
    }
}
