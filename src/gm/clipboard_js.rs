//! `GM_setClipboard(data, type)` / `GM.setClipboard`, written from the script's own world: a
//! `copy` command whose event the script fills (`clipboardData.setData`), and if Chrome refuses
//! the command, `navigator.clipboard.writeText`. The page shares the DOM and its copy listeners
//! run during that command: only Chrome's own (trusted) event is filled, never one the page
//! dispatches then. Chrome allows a copy after a user action in the page (a click, a key) while
//! its document has the focus. A menu command clicked in the popup has neither (the click and
//! the focus are the popup's), so a refused write then goes to the worker, which has the popup
//! write it if that click allows it (`gm::clipboard`); otherwise the script is told Chrome's
//! refusal (console error; `GM.setClipboard` rejects). No offscreen document: it would need the
//! `clipboardWrite` permission, one more warning at install, and would let a script write at
//! any time.

pub const SET_CLIPBOARD_JS: &str = concat!(
    "const CB=(v,t)=>{const k=t&&typeof t==='object'?t.type||t.mimetype:t;",
    "const m=k==='html'||k==='text/html'?'text/html':typeof k==='string'&&k.includes('/')?k:'text/plain';",
    // Only Chrome's own event for the command (`isTrusted`): the page's listener runs during it
    // and may dispatch a copy event of its own, with a DataTransfer it reads back.
    "const s=String(v);let ok=false;const h=e=>{if(!e.isTrusted)return;try{e.clipboardData.setData(m,s);",
    "if(m!=='text/plain')e.clipboardData.setData('text/plain',s);e.preventDefault();e.stopImmediatePropagation();ok=true}catch(x){}};",
    "document.addEventListener('copy',h,true);try{document.execCommand('copy')}catch(e){}finally{document.removeEventListener('copy',h,true)}",
    "if(ok)return Promise.resolve();",
    "const no=()=>{throw new Error('GM_setClipboard: Chrome refused to write the clipboard (it allows it after a user action in the page, such as a click)')};",
    // Refused here: the popup writes it if the user just clicked one of this script's commands
    // there. Its answer says why not (a try or a world without channel: Chrome's refusal).
    // The channel takes a message of at most 600 KiB as JSON text: a longer one would get no
    // answer at all (R16: 400 KiB of line breaks is 800 KiB escaped).
    "const pop=()=>JSON.stringify(s).length>__MAXJ__?Promise.reject(new Error('GM_setClipboard: Chrome refused to write the clipboard, and the text is too long for the popup to copy it (over __MAXJ__ characters as JSON)')):",
    "S('clipboard',{text:s,type:m}).then(r=>{if(r&&r.ok)return;",
    "if(r&&typeof r.error==='string'&&r.error.startsWith('GM_setClipboard'))throw new Error(r.error);no()},()=>no());",
    "return(navigator.clipboard&&navigator.clipboard.writeText?navigator.clipboard.writeText(s):Promise.reject()).then(()=>{},pop)};",
    "d('GM_setClipboard',(v,t,f)=>{CB(v,t).then(()=>{if(typeof f==='function')f()},e=>console.error(e.message))});",
    "G.setClipboard=(v,t)=>CB(v,t);",
);

#[cfg(test)]
mod tests {
    #[test]
    fn one_line() {
        assert!(!super::SET_CLIPBOARD_JS.contains('\n'));
        // The page's bound is filled in where the code is put around a script.
        let src = "// ==UserScript==\n// @name c\n// @grant GM_setClipboard\n// ==/UserScript==\n";
        let m = crate::scripts::metadata::parse(src).metadata.unwrap();
        let js = crate::gm::inject::prelude("u", &m, src);
        assert!(
            !js.contains("__MAXJ__") && js.contains(".length>480000?"),
            "{js}"
        );
        if let Ok(p) = std::env::var("LUMO_DUMP_CLIP") {
            let src = "// ==UserScript==\n// @name c\n// @grant GM_setClipboard\n// @grant GM.setClipboard\n// @grant GM_openInTab\n// @grant GM_notification\n// @grant GM_registerMenuCommand\n// ==/UserScript==\n";
            let m = crate::scripts::metadata::parse(src).metadata.unwrap();
            std::fs::write(p, crate::gm::inject::prelude("u", &m, src)).unwrap();
        }
    }
}
