//! Watching "Allow User Scripts" while Chrome holds registrations older than storage
//! (`Provider::awaiting_toggle`): a script changed while the switch was off could not reach
//! Chrome, and no event fires when the user turns it back on, so the first pages loaded after
//! ran what Chrome still held until the worker woke for another reason. While that is so, the
//! switch is checked every second and the registry reconciled as soon as it is on; the worker
//! is kept running for it (a browser call every 20 s), for at most half an hour.

use std::cell::Cell;

use wasm_bindgen_futures::{spawn_local, JsFuture};

use super::{api, env::timeout, provider};

const POLL_MS: f64 = 1_000.0;
const KEEPALIVE_EVERY: u32 = 20;
const MAX_POLLS: u32 = 30 * 60;

thread_local! {
    static WATCHING: Cell<bool> = const { Cell::new(false) };
}

/// `Provider::ensure_registry`, then the watch if the registry waits for the switch.
pub async fn ensure_registry() {
    provider().ensure_registry().await;
    start_if_needed();
}

pub(super) fn start_if_needed() {
    if WATCHING.with(Cell::get) || !provider().awaiting_toggle() {
        return;
    }
    WATCHING.with(|w| w.set(true));
    spawn_local(async {
        for n in 1..=MAX_POLLS {
            timeout(POLL_MS).await;
            let p = provider();
            if !p.awaiting_toggle() {
                // On again (or reconciled by another path): `capability` notes it, the
                // reconcile registers what storage holds.
                p.capability();
                p.ensure_registry().await;
                WATCHING.with(|w| w.set(false));
                // Off again before the reconcile was done: watch again.
                return start_if_needed();
            }
            if n % KEEPALIVE_EVERY == 0 {
                if let Ok(info) = api::get_platform_info() {
                    let _ = JsFuture::from(info).await;
                }
            }
        }
        WATCHING.with(|w| w.set(false));
    });
}
