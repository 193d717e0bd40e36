//! The page side of `GM_getTab`, `GM_saveTab` and `GM_getTabs` (and `GM.getTab`,
//! `GM.saveTab`, `GM.getTabs`), put in the prelude by `gm::inject` for scripts that grant them.
//! Needs `S`, `d`, `G` in scope. The worker keeps the objects (`gm::tab_objects`); they travel
//! as JSON text, so the script always gets a fresh copy and stores one, as in Tampermonkey.
//!
//! `GM_getTab(cb)` / `GM_getTabs(cb)` call back asynchronously; a failure is logged to the
//! console (the promise forms reject with it). `GM_saveTab(o)` returns nothing, a refusal
//! (not JSON, over 64 KiB, the script's bounds) is logged; `GM.saveTab(o)` resolves once the
//! object is stored, or rejects with why. The size is checked here first, so an object of
//! megabytes is refused before it is sent (the worker checks again).

use super::tab_objects::MAX_OBJECT_BYTES;

pub const GET_TAB_JS: &str = concat!(
    "const TBG=()=>S('tabobj.get',{}).then(r=>{if(!r||r.error||typeof r.tab!=='string')",
    "throw new Error(r&&r.error||'GM_getTab: no answer from the provider');return JSON.parse(r.tab)});",
    "d('GM_getTab',f=>{TBG().then(t=>{if(typeof f==='function')f(t)},e=>console.error(e.message))});",
    "G.getTab=()=>TBG();",
);

pub const GET_TABS_JS: &str = concat!(
    "const TBA=()=>S('tabobj.all',{}).then(r=>{if(!r||r.error||typeof r.tabs!=='string')",
    "throw new Error(r&&r.error||'GM_getTabs: no answer from the provider');return JSON.parse(r.tabs)});",
    "d('GM_getTabs',f=>{TBA().then(t=>{if(typeof f==='function')f(t)},e=>console.error(e.message))});",
    "G.getTabs=()=>TBA();",
);

pub fn save_tab_js() -> String {
    format!(
        "const TBS=t=>{{let j;try{{j=JSON.stringify(t)}}catch(e){{return Promise.reject(new Error('GM_saveTab: the tab object cannot be made JSON ('+e.message+'); the tab keeps its earlier object'))}}\
         if(typeof j!=='string')return Promise.reject(new Error('GM_saveTab: the tab object must be something JSON can hold, not '+typeof t+'; the tab keeps its earlier object'));\
         const n=new TextEncoder().encode(j).length;if(n>{MAX_OBJECT_BYTES})return Promise.reject(new Error('GM_saveTab: the tab object is '+n+' bytes as JSON, over the {} KiB one tab may hold; the tab keeps its earlier object'));\
         return S('tabobj.save',{{tab:j}}).then(r=>{{if(!r||r.error)throw new Error(r&&r.error||'GM_saveTab: no answer from the provider')}})}};\
         d('GM_saveTab',t=>{{TBS(t).catch(e=>console.error(e.message))}});G.saveTab=t=>TBS(t);",
        MAX_OBJECT_BYTES / 1024
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn one_line() {
        for js in [
            super::GET_TAB_JS.to_owned(),
            super::GET_TABS_JS.to_owned(),
            super::save_tab_js(),
        ] {
            assert!(!js.contains('\n'), "{js}");
        }
        assert!(super::save_tab_js().contains("n>65536"));
    }
}
