//! The provider's side of `GM_setClipboard` written by the popup (rule: `gm::clipboard`). A
//! click on a menu command is noted (`note_click`); the script's page, refused by Chrome, asks
//! (`gm_clipboard`); the popup that clicked asks for what to write (`menu_clipboard`, by the
//! entry it clicked), writes it with its own user action and says how that went
//! (`menu_clipboard_done`), which is what the page is told. Either of the two asks may come
//! first. The text goes to no one else: only the popup naming the clicked entry gets it, and a
//! page's write waits at most [`HANDOFF_MS`] for that popup.

use futures::channel::oneshot;
use serde_json::{json, Value};

use super::Provider;
use crate::env::Env;
use crate::gm::clipboard::{self, Click, Write};

/// How long a page's write waits for the popup to write it (the popup may have closed).
pub const HANDOFF_MS: f64 = 6_000.0;
/// A page's writes that may wait for the popup at once (a command may copy twice: the last
/// one written is what the clipboard holds, as in a page).
pub const MAX_PENDING: usize = 4;

/// The click, the page's writes waiting for the popup, and the popup's wait for them.
#[derive(Default)]
pub(crate) struct Handoff {
    click: Option<Click>,
    /// Oldest first; a handed one waits for the popup's outcome.
    pending: Vec<Pending>,
    /// The popup's wait: the entry it clicked, the wait's number, where to answer.
    popup: Option<(u64, u64, oneshot::Sender<Value>)>,
    next_ticket: u64,
}

struct Pending {
    ticket: u64,
    entry: u64,
    /// `None` once handed to the popup.
    write: Option<Write>,
    answer: oneshot::Sender<Value>,
}

impl Handoff {
    /// The oldest write for `entry` not yet handed to its popup: handed now.
    fn hand(&mut self, entry: u64) -> Option<Value> {
        let p = self
            .pending
            .iter_mut()
            .find(|p| p.entry == entry && p.write.is_some())?;
        let w = p.write.take()?;
        Some(offer(p.ticket, &w))
    }

    /// Answers and drops the writes not yet handed that `drop` picks.
    fn refuse(&mut self, drop: impl Fn(&Pending) -> bool, why: &str) {
        let (gone, kept): (Vec<Pending>, Vec<Pending>) = std::mem::take(&mut self.pending)
            .into_iter()
            .partition(|p| p.write.is_some() && drop(p));
        self.pending = kept;
        for p in gone {
            let _ = p.answer.send(json!({ "error": why }));
        }
    }
}

fn offer(ticket: u64, w: &Write) -> Value {
    json!({ "ok": true, "ticket": ticket, "text": w.text, "html": w.html })
}

impl<E: Env> Provider<E> {
    /// The user clicked a command of entry `entry` (script `uuid`, page `document`) in the popup.
    /// Writes an earlier click left for a popup that never asked are not this click's.
    pub(crate) fn note_click(&self, entry: u64, uuid: &str, document: Option<&str>) {
        let now = self.env.now_ms();
        let mut h = self.clipboard.borrow_mut();
        h.refuse(
            |_| true,
            "GM_setClipboard: the popup did not write it before another menu command was clicked",
        );
        h.click = document.map(|d| Click {
            entry,
            uuid: uuid.to_owned(),
            document: d.to_owned(),
            at: now,
        });
    }

    /// The page's write that Chrome refused: written by the popup if a click allows it, else
    /// refused as Chrome refused it.
    pub(crate) async fn gm_clipboard(
        &self,
        record: &crate::scripts::record::ScriptRecord,
        from: &super::Sender,
        write: Write,
    ) -> Value {
        if !super::gm::grants_any(record, &["GM_setClipboard"]) {
            return json!({ "error": "GM_setClipboard: this script does not @grant GM_setClipboard" });
        }
        let uuid = record.uuid.as_str();
        let now = self.env.now_ms();
        let (tx, rx) = oneshot::channel();
        let ticket = {
            let mut h = self.clipboard.borrow_mut();
            let Some(entry) =
                clipboard::clicked_for(h.click.as_ref(), uuid, from.document_id.as_deref(), now)
            else {
                return json!({ "error": clipboard::REFUSED });
            };
            if h.pending.len() >= MAX_PENDING {
                let oldest = h
                    .pending
                    .iter()
                    .find(|p| p.write.is_some())
                    .map(|p| p.ticket);
                h.refuse(
                    |p| Some(p.ticket) == oldest,
                    "GM_setClipboard: later writes of this script's replaced this one before the popup wrote it",
                );
                if h.pending.len() >= MAX_PENDING {
                    return json!({ "error": "GM_setClipboard: the popup is still writing this script's earlier copies" });
                }
            }
            h.next_ticket += 1;
            let ticket = h.next_ticket;
            h.pending.push(Pending {
                ticket,
                entry,
                write: Some(write),
                answer: tx,
            });
            // The popup already waits: it gets the oldest not yet handed (this one, or one
            // before it; it asks again for the rest). A wait that stopped listening gets none.
            let waiting = h.popup.take_if(|(e, _, s)| *e == entry && !s.is_canceled());
            if let Some((_, _, popup)) = waiting {
                if let Some(offered) = h.hand(entry) {
                    let _ = popup.send(offered);
                }
            }
            ticket
        };
        let timer = self.env.sleep(HANDOFF_MS);
        futures::pin_mut!(timer);
        match futures::future::select(rx, timer).await {
            futures::future::Either::Left((Ok(v), _)) => v,
            _ => {
                self.clipboard
                    .borrow_mut()
                    .pending
                    .retain(|p| p.ticket != ticket);
                json!({ "error": "GM_setClipboard: the popup closed before it wrote the clipboard (Chrome refused the page's own write)" })
            }
        }
    }

    /// The popup's wait after its click on `entry`: the oldest write the script's page asks it
    /// to make (`{ok, ticket, text, html}`), or `{ok}` alone when nothing comes within the
    /// click's window. The popup asks again after each write, for one that came meanwhile.
    pub async fn menu_clipboard(&self, entry: u64) -> Value {
        let (tx, rx) = oneshot::channel();
        let wait = {
            let mut h = self.clipboard.borrow_mut();
            if let Some(offered) = h.hand(entry) {
                return offered;
            }
            h.next_ticket += 1;
            let wait = h.next_ticket;
            if let Some((_, _, old)) = h.popup.replace((entry, wait, tx)) {
                let _ = old.send(json!({ "ok": true }));
            }
            wait
        };
        let timer = self.env.sleep(clipboard::CLICK_WINDOW_MS);
        futures::pin_mut!(timer);
        match futures::future::select(rx, timer).await {
            futures::future::Either::Left((Ok(v), _)) => v,
            _ => {
                let _ = self
                    .clipboard
                    .borrow_mut()
                    .popup
                    .take_if(|(_, w, _)| *w == wait);
                json!({ "ok": true })
            }
        }
    }

    /// The popup wrote `ticket` (or could not: `error`); its page is told.
    pub fn menu_clipboard_done(&self, ticket: u64, error: Option<&str>) -> Value {
        let mut h = self.clipboard.borrow_mut();
        let Some(i) = h
            .pending
            .iter()
            .position(|p| p.ticket == ticket && p.write.is_none())
        else {
            return json!({ "ok": false, "error": "that clipboard write is no longer waiting (its page gave up, or a later one replaced it)" });
        };
        let p = h.pending.remove(i);
        let answer = match error {
            None => json!({ "ok": true }),
            Some(e) => {
                json!({ "error": format!("GM_setClipboard: the popup could not write the clipboard: {}", crate::text::ellipsize(e, 200)) })
            }
        };
        let _ = p.answer.send(answer);
        json!({ "ok": true })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::channel::key_store;
    use crate::env::memory::MemoryEnv;
    use crate::provider::gm_test_support::{answered, finish, script};
    use crate::provider::Sender;
    use futures::future::join;

    const GRANTS: &str = "// @grant GM_registerMenuCommand\n// @grant GM.setClipboard\n";

    fn page(doc: &str) -> Sender {
        Sender {
            url: Some("https://example.com/".into()),
            frame_id: Some(0),
            tab_id: Some(5),
            document_id: Some(doc.into()),
            ..Sender::default()
        }
    }

    fn copy(token: &str, text: &str) -> String {
        json!({"lumo": token, "v": 1, "kind": "gm", "op": "clipboard", "text": text, "type": "text/html"}).to_string()
    }

    /// Script `A`'s page `d1` with a menu command, clicked in the popup: `(p, tokens, entry)`,
    /// the tokens of `A`, of `B` (granted `GM_setClipboard`) and of `N` (not granted).
    fn clicked() -> (Provider<MemoryEnv>, [String; 3], u64) {
        let p = Provider::new(MemoryEnv::new());
        let a = script(&p, "A", GRANTS);
        let b = script(&p, "B", "// @grant GM_setClipboard\n");
        let n = script(&p, "N", "// @grant GM_registerMenuCommand\n");
        let key = finish(key_store::load(&p.env)).unwrap();
        let ta = key.token(&a, 1);
        let menu = json!({"lumo": ta, "v": 1, "kind": "gm", "op": "menu", "commands": [["c", "Copy", null]]}).to_string();
        let wait = p.user_script_message(|| Some(menu.clone()), page("d1"));
        let click = async {
            let entry = p.menu_list(5).await["items"][0]["entry"].as_u64().unwrap();
            assert_eq!(p.menu_click(entry, "c").await, Ok(true));
            entry
        };
        let (r, entry) = finish(join(wait, click));
        assert_eq!(answered(r), json!({"click": "c"}));
        (p, [ta, key.token(&b, 1), key.token(&n, 1)], entry)
    }

    #[test]
    fn a_clicked_commands_copy_is_written_by_the_popup_that_clicked_it_in_either_order() {
        let (p, [ta, ..], entry) = clicked();
        // The page asks first; the popup's wait finds it.
        let asked = p.user_script_message(|| Some(copy(&ta, "<b>one</b>")), page("d1"));
        let popup = async {
            let got = p.menu_clipboard(entry).await;
            assert_eq!(got["text"], "<b>one</b>");
            assert_eq!(got["html"], true);
            let t = got["ticket"].as_u64().unwrap();
            assert_eq!(p.menu_clipboard_done(t, None), json!({"ok": true}));
            // Told once: the same ticket again is not waiting.
            assert_eq!(p.menu_clipboard_done(t, None)["ok"], false);
        };
        let (r, ()) = finish(join(asked, popup));
        assert_eq!(answered(r), json!({"ok": true}));
        // The popup waits first; the page's write is handed to it. The popup could not write:
        // the page is told why.
        let popup = async {
            let got = p.menu_clipboard(entry).await;
            let t = got["ticket"].as_u64().unwrap();
            p.menu_clipboard_done(t, Some("Document is not focused."));
        };
        let asked = p.user_script_message(|| Some(copy(&ta, "two")), page("d1"));
        let ((), r) = finish(join(popup, asked));
        let r = answered(r);
        assert!(
            r["error"]
                .as_str()
                .unwrap()
                .contains("could not write the clipboard: Document is not focused."),
            "{r}"
        );
    }

    #[test]
    fn no_copy_without_a_click_for_that_scripts_page_within_seconds() {
        let (p, [ta, tb, tn], entry) = clicked();
        // Another script in the clicked page rides nothing of A's click.
        let r = answered(finish(
            p.user_script_message(|| Some(copy(&tb, "b")), page("d1")),
        ));
        assert_eq!(r["error"], clipboard::REFUSED);
        // A in another page of its own.
        let r = answered(finish(
            p.user_script_message(|| Some(copy(&ta, "a")), page("d2")),
        ));
        assert_eq!(r["error"], clipboard::REFUSED);
        // A script without the grant is refused as such.
        let r = answered(finish(
            p.user_script_message(|| Some(copy(&tn, "n")), page("d1")),
        ));
        assert!(
            r["error"]
                .as_str()
                .unwrap()
                .contains("does not @grant GM_setClipboard"),
            "{r}"
        );
        // A, too late.
        p.env.advance(clipboard::CLICK_WINDOW_MS + 1.0);
        let r = answered(finish(
            p.user_script_message(|| Some(copy(&ta, "a")), page("d1")),
        ));
        assert_eq!(r["error"], clipboard::REFUSED);
        // Nothing was offered to the popup meanwhile: its wait ends empty.
        p.env.timers_fire.set(true);
        assert_eq!(finish(p.menu_clipboard(entry)), json!({"ok": true}));
    }

    #[test]
    fn a_page_whose_popup_never_asks_is_told_and_its_text_is_not_kept() {
        let (p, [ta, ..], entry) = clicked();
        p.env.timers_fire.set(true);
        let r = answered(finish(
            p.user_script_message(|| Some(copy(&ta, "secret")), page("d1")),
        ));
        assert!(
            r["error"].as_str().unwrap().contains("the popup closed"),
            "{r}"
        );
        // A popup asking later gets nothing of it.
        assert_eq!(finish(p.menu_clipboard(entry)), json!({"ok": true}));
    }

    /// R16: a command that copies twice (text, then a corrected text) had its first write told
    /// "replaced" while the popup was writing it, and its second lost. Each is handed in turn.
    #[test]
    fn a_command_that_copies_twice_has_both_written_in_order() {
        let (p, [ta, ..], entry) = clicked();
        let first = p.user_script_message(|| Some(copy(&ta, "one")), page("d1"));
        let second = p.user_script_message(|| Some(copy(&ta, "two")), page("d1"));
        let popup = async {
            let mut written = Vec::new();
            for _ in 0..2 {
                let got = p.menu_clipboard(entry).await;
                written.push(got["text"].as_str().unwrap().to_owned());
                let t = got["ticket"].as_u64().unwrap();
                assert_eq!(p.menu_clipboard_done(t, None), json!({"ok": true}));
            }
            written
        };
        let ((a, b), written) = finish(join(join(first, second), popup));
        assert_eq!(written, ["one", "two"]);
        assert_eq!(
            (answered(a), answered(b)),
            (json!({"ok": true}), json!({"ok": true}))
        );
    }

    /// R16: a write left by a click whose popup never asked was handed to the popup of the next
    /// click, as that command's copy. A click refuses what an earlier one left.
    #[test]
    fn a_new_click_does_not_hand_over_what_an_earlier_one_left() {
        let (p, [ta, ..], entry) = clicked();
        let left = p.user_script_message(|| Some(copy(&ta, "stale")), page("d1"));
        let click = async {
            assert!(p.menu_click(entry, "c").await.is_ok());
        };
        let (r, ()) = finish(join(left, click));
        let r = answered(r);
        assert!(
            r["error"]
                .as_str()
                .unwrap()
                .contains("before another menu command was clicked"),
            "{r}"
        );
        p.env.timers_fire.set(true);
        assert_eq!(finish(p.menu_clipboard(entry)), json!({"ok": true}));
    }
}
