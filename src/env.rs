//! What the core needs from the outside world, as small traits. The shell (`chrome`) implements
//! them over `chrome.storage` and `chrome.userScripts`; [`memory::MemoryEnv`] implements them in
//! memory for native tests. Single-threaded: no `Send` bounds.

#![allow(async_fn_in_trait)]

use serde_json::{Map, Value};
use std::fmt;

/// `chrome.storage.local` survives restarts; `chrome.storage.session` survives service-worker
/// recycling but not a browser restart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Area {
    Local,
    Session,
}

impl Area {
    /// The area `chrome.storage.onChanged` names; areas we do not use (`sync`, `managed`) are
    /// none of ours.
    #[must_use]
    pub fn parse(name: &str) -> Option<Area> {
        match name {
            "local" => Some(Area::Local),
            "session" => Some(Area::Session),
            _ => None,
        }
    }
}

/// The start of [`Tabs::execute`]'s error when the code ran but its answer is over the bound
/// (a page can make it large), so it was not read: the caller must not say nothing ran.
pub const ANSWER_TOO_LARGE: &str = "the code ran, but the page's answer is too large to read";

/// A failure of the outside world (storage quota, an API that threw), carried as text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvError(pub String);

impl fmt::Display for EnvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A key-value store with `chrome.storage` semantics: `set` of several keys is atomic.
pub trait Storage {
    async fn get(&self, area: Area, keys: &[&str]) -> Result<Map<String, Value>, EnvError>;
    async fn set(&self, area: Area, items: Map<String, Value>) -> Result<(), EnvError>;
    async fn remove(&self, area: Area, keys: &[&str]) -> Result<(), EnvError>;
    /// Everything in the area: only for recovery (rebuilding a damaged index).
    async fn get_all(&self, area: Area) -> Result<Map<String, Value>, EnvError>;
    /// The keys stored in the area, without their values (`getKeys`): what a missing list
    /// would have named, found without copying every value in.
    async fn keys(&self, area: Area) -> Result<Vec<String>, EnvError>;
    /// The bytes the area's quota counts (`getBytesInUse`): of `keys`, or of everything with
    /// `None`. Chrome counts each item as its key and its value's JSON.
    async fn bytes_in_use(&self, area: Area, keys: Option<&[&str]>) -> Result<usize, EnvError>;
}

/// Time and randomness, injected so decisions are reproducible in tests.
pub trait Clock {
    /// Milliseconds since the Unix epoch, as `Date.now()`.
    fn now_ms(&self) -> f64;
}

/// Whether the browser can run user scripts right now (the "Allow User Scripts" toggle).
pub trait Capabilities {
    fn user_scripts_available(&self) -> bool;
    /// The system and browser `GM_info.platform` describes, as JSON text (`{arch, os,
    /// browserName, browserVersion}`, learned once by the worker's loader: `sw.js`); `""` when
    /// not known. Read when a registration is built (`gm::inject::platform_js` keeps only its
    /// four strings).
    fn platform(&self) -> String {
        String::new()
    }
}

/// What a `chrome.userScripts` call refused *synchronously* says about the "Allow User Scripts"
/// toggle (Chromium 156; `tests/e2e/userscripts.test.mjs` flips it and probes): the binding checks that the
/// API is available before it checks the arguments, so a call with a wrong argument type costs
/// no round trip to the browser and still tells the two apart. `None`: a message not known here
/// (the caller asks Chrome for real).
pub fn availability_from(message: &str) -> Option<bool> {
    // A plain search, not `str::contains`: the message is short, and the probe module compiles
    // what it calls on a cold probe's way (`str::contains`'s Two-Way searcher is 2 KB of it).
    let has = |part: &str| {
        message
            .as_bytes()
            .windows(part.len())
            .any(|w| w == part.as_bytes())
    };
    if has("No matching signature") || has("Error in invocation of") {
        Some(true)
    } else if has("is not available in this context") {
        Some(false)
    } else {
        None
    }
}

/// The content security policy of every USER_SCRIPT world: each script's own, and the default
/// one, which every world without a configuration of its own takes (`try_script`'s worlds, and
/// the world shared by the scripts past a page's tenth), so a try runs under the policy the
/// installed script will. Without one a world has the extension's own (`script-src 'self' …`),
/// under which a script's `eval` and `new Function` throw, and a `<script>` it puts in the page
/// (`GM_addElement('script', …)`, the classic injection that reaches the page's JavaScript,
/// which `unsafeWindow` does not here) is blocked: real scripts and their `@require` libraries
/// do all of these, and Tampermonkey and Violentmonkey allow them. It governs only what the
/// user's script does in its world; the extension's pages keep theirs. The default world
/// configured with a policy is one of Chrome's 100 world configurations, so 99 scripts can have
/// a world of their own (matching.test.mjs, "the 101st script").
pub const WORLD_CSP: &str = "script-src * blob: data: 'unsafe-inline' 'unsafe-eval'";

/// `chrome.userScripts`: what is registered to run. Every call may fail (the toggle is off, or was
/// turned off while running), and the core treats that as "reconcile later", never as fatal.
pub trait UserScripts {
    /// Registrations, all or those with the given ids.
    async fn registered(&self, ids: Option<&[String]>) -> Result<Vec<Registration>, EnvError>;
    async fn register(&self, regs: &[Registration]) -> Result<(), EnvError>;
    async fn update(&self, regs: &[Registration]) -> Result<(), EnvError>;
    async fn unregister(&self, ids: &[String]) -> Result<(), EnvError>;
    /// Configures the default USER_SCRIPT world (every world without its own configuration):
    /// no messaging, and [`WORLD_CSP`].
    async fn configure_world(&self) -> Result<(), EnvError>;
    /// The worlds Chrome holds a configuration for (`getWorldConfigurations`): the scripts'
    /// and the default one's (`world_id: None`).
    async fn world_configurations(&self) -> Result<Vec<WorldConfig>, EnvError>;
    /// Configures one script's own world (`worldId`): whether it may message the worker, and
    /// [`WORLD_CSP`].
    async fn configure_script_world(&self, world_id: &str, messaging: bool)
        -> Result<(), EnvError>;
    /// Drops one world's configuration (`resetWorldConfiguration`): Chrome holds at most 100,
    /// for as long as the extension is installed, so a script no longer registered gives its
    /// back. Resetting a world without one succeeds.
    async fn reset_script_world(&self, world_id: &str) -> Result<(), EnvError>;
}

/// One world's configuration as Chrome reports it (`messaging` and `csp` as given: Chrome may
/// leave them out).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorldConfig {
    /// `None`: the default world's.
    pub world_id: Option<String>,
    pub messaging: Option<bool>,
    pub csp: Option<String>,
}

/// Randomness for new script ids.
pub trait Ids {
    /// A fresh RFC 4122 v4 uuid, lowercase.
    fn new_uuid(&self) -> String;
}

/// Timers, for bounded waits (a write waiting for the user's review).
pub trait Timer {
    async fn sleep(&self, ms: f64);
}

/// An open tab, as `chrome.tabs.query` describes it (url and title only where the extension has
/// host permission; empty otherwise).
#[derive(Debug, Clone, PartialEq)]
pub struct Tab {
    pub id: i64,
    pub url: String,
    pub title: String,
    /// `lastAccessed`, ms since the epoch (0 when Chrome does not say).
    pub last_accessed: f64,
    /// In an incognito window (the extension allowed there shares one worker with the regular
    /// windows, and `tabs.query` lists both).
    pub incognito: bool,
}

/// Where a document is now, as `chrome.webNavigation.getFrame({documentId})` tells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DocumentState {
    /// Shown in its frame (`documentLifecycle: "active"`).
    Active,
    /// Alive but not shown: prerendering, or kept in the back/forward cache.
    Inactive,
    /// No such document: its frame navigated or was removed, its tab closed. Chromium 156 also
    /// answers this for a page in the back/forward cache (measured in e2e), and the same id
    /// answers `Active` again once the page is restored.
    Gone,
}

/// Open tabs and running code in them once (`chrome.userScripts.execute`, `try_script`).
pub trait Tabs {
    /// Every open tab the extension may see (`tabs.query({})`).
    async fn tabs(&self) -> Result<Vec<Tab>, EnvError>;
    /// One tab by its id (`tabs.get`): an error when there is none.
    async fn tab(&self, id: i64) -> Result<Tab, EnvError>;
    /// Where the document `id` (a sender's `documentId`) is now.
    async fn document(&self, id: &str) -> Result<DocumentState, EnvError>;
    /// The addresses of the tab's frames now, the top one's included
    /// (`webNavigation.getAllFrames`).
    async fn frame_urls(&self, tab_id: i64) -> Result<Vec<String>, EnvError>;
    /// Runs `codes` (the entries, in order, in one world) once in the tab, in all frames or the
    /// top one, in the USER_SCRIPT world `world`; Chrome's per-frame results (`{frameId,
    /// result?, error?}`, the last entry's value), as JSON. An answer too large to read is the
    /// error [`ANSWER_TOO_LARGE`]: the code ran.
    async fn execute(
        &self,
        tab_id: i64,
        all_frames: bool,
        world: &str,
        codes: &[String],
    ) -> Result<Value, EnvError>;
}

/// Chrome stops an idle worker after 30 s; any extension API call resets that timer. A long
/// wait (a write under review) sleeps in steps of at most this, with a cheap call between them.
pub const KEEPALIVE_STEP_MS: f64 = 20_000.0;

/// The steps of a wait of `ms`: each step's length, and whether a keep-alive call follows it
/// (only between steps, never after the last). NaN or negative waits take no step.
pub fn sleep_steps(ms: f64) -> impl Iterator<Item = (f64, bool)> {
    let mut left = if ms.is_nan() { 0.0 } else { ms };
    std::iter::from_fn(move || {
        if left <= 0.0 {
            return None;
        }
        let step = left.min(KEEPALIVE_STEP_MS);
        left -= step;
        Some((step, left > 0.0))
    })
}

/// Whole milliseconds from `since` to `now` (clock readings), 0 if the clock went back: what a
/// deadline has left is `budget.saturating_sub(elapsed_ms(..))`.
#[must_use]
pub fn elapsed_ms(now: f64, since: f64) -> u64 {
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let ms = (now - since).clamp(0.0, 1e12) as u64;
    ms
}

/// A wait in whole milliseconds for `setTimeout`: NaN → 0, clamped to 0..=2^31−1 (setTimeout
/// caps there anyway), so the conversion is exact.
#[must_use]
pub fn timer_ms(ms: f64) -> u32 {
    let ms = if ms.is_nan() {
        0.0
    } else {
        ms.clamp(0.0, f64::from(i32::MAX))
    };
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let whole = ms as u32;
    whole
}

/// A request the worker makes for a script's `GM_xmlhttpRequest` or `@require`/`@resource`
/// file, after the core decided it may be sent (`gm::xhr::decide`, `gm::assets::wanted`). The
/// browser follows none of its redirects: each is answered as such, for the core to judge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpRequest {
    pub method: String,
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub body: Option<crate::gm::message::Body>,
    pub timeout_ms: u64,
    /// No cookies.
    pub anonymous: bool,
    /// Headers `fetch` may not set that the browser's network layer sets on this request alone
    /// (`gm::xhr::split_headers`: a script's `Referer`, `Cookie`, `User-Agent`).
    pub browser_headers: Vec<BrowserHeader>,
}

/// One header the shell has the browser set on a request (`declarativeNetRequest`, a rule for
/// that request alone).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrowserHeader {
    pub name: String,
    /// Unused by [`HeaderOp::Remove`].
    pub value: String,
    pub op: HeaderOp,
}

/// What the browser does with a [`BrowserHeader`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeaderOp {
    /// In place of the browser's own value.
    Set,
    /// Added to the browser's own value (the site's cookies).
    Append,
    /// The browser's own value is not sent (the worker's `Origin`).
    Remove,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpResponse {
    pub status: u16,
    pub status_text: String,
    /// After redirects.
    pub final_url: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// A redirect (the browser follows none: `redirect: "manual"`): where it leads. `status`
    /// is then the redirect's, and there are no headers or body.
    pub location: Option<String>,
}

/// Why a [`Http`] fetch gave no answer. Typed, so the core tells a body over its bound or a
/// timeout from other failures without reading the browser's words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FetchError {
    /// The body passed `max_body` (by its `Content-Length`, or as it arrived): the browser
    /// stopped reading it, and kept none of it.
    TooLarge { max: usize },
    /// The request's `timeout_ms` ran out.
    Timeout,
    /// The browser would not set the headers `fetch` may not (`HttpRequest::browser_headers`,
    /// named here) on this request, so it was not sent: sent without them it would be another
    /// request than the script asked for (a `Referer` a site checks, the script's `Cookie`).
    HeadersNotSet { names: Vec<String> },
    /// Anything else (the network, the browser's refusal, a `progress` that said no), in words.
    Other(String),
}

impl fmt::Display for FetchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FetchError::TooLarge { max } => write!(f, "the response is over {max} bytes"),
            FetchError::Timeout => f.write_str("timeout"),
            FetchError::HeadersNotSet { names } => write!(
                f,
                "Chrome did not take the rule that would set its {} (headers fetch may not \
                 set), so the request was not sent",
                names.join(", ")
            ),
            FetchError::Other(e) => f.write_str(e),
        }
    }
}

/// What `Http::fetch_progress` does with the body's bytes it asks about.
#[derive(Debug)]
pub enum Hold {
    /// Keep them and read on.
    Keep,
    /// Wait, reading nothing, until this completes, then ask again (the core's budget of
    /// answers' bytes has no room yet; an error: the request ended meanwhile, stop).
    Wait(futures::channel::oneshot::Receiver<()>),
    /// Keep nothing more: stop reading and abort the request.
    Stop,
}

/// Asks `progress` about `loaded` bytes until it keeps them (`true`) or stops (`false`).
pub async fn hold_bytes(
    progress: &dyn Fn(u64, Option<u64>) -> Hold,
    loaded: u64,
    total: Option<u64>,
) -> bool {
    loop {
        match progress(loaded, total) {
            Hold::Keep => return true,
            Hold::Stop => return false,
            Hold::Wait(room) => {
                if room.await.is_err() {
                    return false;
                }
            }
        }
    }
}

/// `fetch` from the service worker.
pub trait Http {
    async fn fetch(&self, req: &HttpRequest, max_body: usize) -> Result<HttpResponse, FetchError>;
    /// `fetch`, asking `progress(loaded, total)` before it keeps each chunk of the body
    /// (`loaded`: the body's bytes with that chunk; `total`: the `Content-Length`, if any), and,
    /// when the length is known, `progress(0, total)` before it reads any (`hold_bytes`). On
    /// `Stop` it keeps nothing more: it stops reading, aborts the request and answers an
    /// error (the core's budget of answers' bytes, `gm::xhr_flight`, said no); on `Wait` it
    /// reads nothing until told. `head` is told the answer without its body once its status
    /// and headers are in, before the body is read (not for a redirect). By default no
    /// reports.
    async fn fetch_progress(
        &self,
        req: &HttpRequest,
        max_body: usize,
        progress: &dyn Fn(u64, Option<u64>) -> Hold,
        head: &dyn Fn(&HttpResponse),
    ) -> Result<HttpResponse, FetchError> {
        let _ = (progress, head);
        self.fetch(req, max_body).await
    }
}

/// Everything the provider needs.
/// Tabs and notifications a script's GM functions open (`GM_openInTab`, `GM_notification`).
/// The core makes Chrome's exact arguments (`gm::tabs`); the shell passes them on.
pub trait Browser {
    /// `chrome.tabs.create(props)`: the new tab's id.
    async fn create_tab(&self, props: &Value) -> Result<i64, EnvError>;
    async fn remove_tab(&self, id: i64) -> Result<(), EnvError>;
    /// `chrome.notifications.create(id, options)`.
    async fn create_notification(&self, id: &str, options: &Value) -> Result<(), EnvError>;
    async fn clear_notification(&self, id: &str) -> Result<(), EnvError>;
}

pub trait Env:
    Storage + Clock + Capabilities + UserScripts + Ids + Timer + Tabs + Http + Browser
{
}
impl<T: Storage + Clock + Capabilities + UserScripts + Ids + Timer + Tabs + Http + Browser> Env
    for T
{
}

pub use crate::scripts::registry::Registration;

pub mod memory {
    //! In-memory environment for native tests.
    use super::*;
    use std::cell::{Cell, RefCell};
    use std::collections::BTreeMap;

    #[derive(Default)]
    pub struct MemoryEnv {
        /// Every `fetch` made (GM_xmlhttpRequest).
        pub fetched: RefCell<Vec<HttpRequest>>,
        pub areas: RefCell<BTreeMap<Area, Map<String, Value>>>,
        pub now: Cell<f64>,
        pub user_scripts: Cell<bool>,
        /// How many times the toggle was checked (`Capabilities::user_scripts_available`).
        pub toggle_checks: Cell<u32>,
        /// When set, every `set` fails with this message (e.g. quota exceeded).
        pub fail_writes: RefCell<Option<String>>,
        pub registrations: RefCell<BTreeMap<String, Registration>>,
        /// Every `register`/`update`/`unregister` call, by name, in order.
        pub registry_calls: RefCell<Vec<&'static str>>,
        pub uuid_counter: Cell<u64>,
        /// `sleep` returns at once when true (a timeout fires immediately), never when false.
        pub timers_fire: Cell<bool>,
        /// When set, `register` fails with this message while the API stays available (Chrome
        /// refusing a registration).
        pub refuse_register: RefCell<Option<String>>,
        /// Ids Chrome refuses (an invalid pattern): a `register` or `update` holding any of
        /// them fails whole, as Chrome's does, and changes nothing.
        pub refuse_ids: RefCell<Vec<String>>,
        /// When true, `register` turns the API off and fails (the toggle flipped mid-way).
        pub lose_api_on_register: Cell<bool>,
        /// When true, a `storage.local` `set` turns the API off first (the toggle flipped
        /// while a write was being stored).
        pub lose_api_on_local_set: Cell<bool>,
        pub tabs: RefCell<Vec<Tab>>,
        /// Every `tabs` and `tab` call: "query", or "get <id>".
        pub tab_calls: RefCell<Vec<String>>,
        /// Chrome's refusal of every `tab` call, when set (a tab strip being dragged…).
        pub tab_error: RefCell<Option<String>>,
        /// What `execute` answers (None: it never settles, like a page in an endless loop).
        pub execute_answer: RefCell<Option<Result<Value, String>>>,
        /// Every `execute` call: (tab, all frames, world, code).
        pub executed: RefCell<Vec<(i64, bool, String, String)>>,
        /// Per-script world configurations: world id → messaging.
        pub worlds: RefCell<BTreeMap<String, bool>>,
        /// Worlds held with another CSP than `WORLD_CSP` (configured by an older version).
        pub worlds_other_csp: RefCell<std::collections::BTreeSet<String>>,
        /// The default world's configuration: `None` until configured, `Some(true)` with
        /// `WORLD_CSP`, `Some(false)` without (as an older version configured it).
        pub default_world: Cell<Option<bool>>,
        /// How many times the default world was configured.
        pub default_configured: Cell<u32>,
        /// How many times the world configurations were read.
        pub world_reads: Cell<u32>,
        /// What `fetch` answers for a URL (`Err`: a failure); others get the default. A body
        /// over the fetch's `max_body` is answered `FetchError::TooLarge`, as the shell does.
        pub http_answers: RefCell<BTreeMap<String, Result<HttpResponse, FetchError>>>,
        /// How long each `fetch` takes (the clock advances by it).
        pub fetch_ms: Cell<f64>,
        /// How many times each `fetch` yields before it answers (a server that takes a while,
        /// while other work runs).
        pub fetch_yields: Cell<u32>,
        /// When set, an answer's body is reported (`fetch_progress`) in chunks of this many
        /// bytes, yielding between them (answers arriving at once); else in one report.
        pub fetch_chunk: Cell<usize>,
        /// When set, an answer's body is reported without its length (no `Content-Length`).
        pub fetch_unsized: Cell<bool>,
        /// URLs whose `fetch` never answers (a slow server), and how many such fetches were
        /// given up (their future dropped: the shell aborts the request then).
        pub http_hold: RefCell<std::collections::BTreeSet<String>>,
        pub fetch_dropped: std::rc::Rc<Cell<u32>>,
        /// Every `Browser` call: (what, its argument).
        pub browser_calls: RefCell<Vec<(String, Value)>>,
        /// Every `set` and `remove` as applied, in order: its area and keys.
        pub storage_log: RefCell<Vec<(Area, Vec<String>)>>,
        /// How many times a `chrome.storage.session` `set` yields before it applies (a slow
        /// call, so what else is in flight runs first).
        pub session_set_yields: Cell<u32>,
        /// When set, every `chrome.storage.session` `set` fails with this message (after its
        /// yields): the rate slot, the registry's flag.
        pub fail_session_writes: RefCell<Option<String>>,
        /// When set, every `chrome.storage.local` `set` fails with this message, while the
        /// session area still takes them (a rate slot is recorded; the audit is not).
        pub fail_local_writes: RefCell<Option<String>>,
        /// A `chrome.storage.local` `set` holding any of these keys fails (quota exceeded):
        /// one kind of write refused while the others are taken.
        pub fail_local_sets_holding: RefCell<Vec<String>>,
        /// When set, a `chrome.storage.local` `set` past `QUOTA_BYTES` fails as Chrome's does
        /// (off by default: it measures the whole area on every `set`).
        pub enforce_quota: Cell<bool>,
        /// A `get` naming any key that starts with one of these fails with this error.
        pub fail_gets: RefCell<Vec<String>>,
        /// How many times a `get` yields before it reads (so what else is in flight runs first),
        /// and a `get_all` after it read (so what else is in flight may write meanwhile).
        pub get_yields: Cell<u32>,
        /// The keys of every `get`, in order.
        pub get_log: RefCell<Vec<Vec<String>>>,
        /// How many times an `update` yields before it applies (Chrome's is slow at scale).
        pub update_yields: Cell<u32>,
        /// For each `update` applied, how many entries `storage_log` had then.
        pub updated_after: RefCell<Vec<usize>>,
        /// How many times a `tabs.create` yields before it answers (Chrome's takes a while).
        pub tab_create_yields: Cell<u32>,
        /// How many times a `tabs.get` yields before it answers.
        pub tab_get_yields: Cell<u32>,
        /// How many times a `tabs.query` yields before it answers.
        pub tab_query_yields: Cell<u32>,
        /// How many times `execute` yields before it answers (a page that takes a while).
        pub execute_yields: Cell<u32>,
        /// Documents not shown now (`document` answers `Active` for any other).
        pub documents: RefCell<BTreeMap<String, DocumentState>>,
        /// Each tab's frames' addresses (`frame_urls`; none for a tab not here).
        pub frames: RefCell<BTreeMap<i64, Vec<String>>>,
    }

    /// Pending once, woken at once: lets every other future in a `join` run a step.
    pub async fn yield_now() {
        let mut yielded = false;
        futures::future::poll_fn(|cx| {
            if yielded {
                std::task::Poll::Ready(())
            } else {
                yielded = true;
                cx.waker().wake_by_ref();
                std::task::Poll::Pending
            }
        })
        .await;
    }

    impl Browser for MemoryEnv {
        /// Tab ids from 1000 up, in order.
        async fn create_tab(&self, props: &Value) -> Result<i64, EnvError> {
            for _ in 0..self.tab_create_yields.get() {
                yield_now().await;
            }
            let mut calls = self.browser_calls.borrow_mut();
            calls.push(("tabs.create".into(), props.clone()));
            Ok(999
                + i64::try_from(calls.iter().filter(|c| c.0 == "tabs.create").count()).unwrap_or(0))
        }
        async fn remove_tab(&self, id: i64) -> Result<(), EnvError> {
            self.browser_calls
                .borrow_mut()
                .push(("tabs.remove".into(), id.into()));
            Ok(())
        }
        async fn create_notification(&self, id: &str, options: &Value) -> Result<(), EnvError> {
            self.browser_calls.borrow_mut().push((
                "notifications.create".into(),
                serde_json::json!([id, options]),
            ));
            Ok(())
        }
        async fn clear_notification(&self, id: &str) -> Result<(), EnvError> {
            self.browser_calls
                .borrow_mut()
                .push(("notifications.clear".into(), id.into()));
            Ok(())
        }
    }

    impl MemoryEnv {
        pub fn new() -> Self {
            let env = MemoryEnv::default();
            env.user_scripts.set(true);
            env.now.set(1_700_000_000_000.0);
            env
        }

        pub fn advance(&self, ms: f64) {
            self.now.set(self.now.get() + ms);
        }

        /// `value` as `chrome.storage` hands it back (in `onChanged` or a `get`): it went through
        /// JavaScript, where a number is a double, and comes back as JSON text, so an integral
        /// `f64` such as a timestamp reads back as an integer.
        pub fn as_chrome_returns(value: &Value) -> Value {
            match value {
                Value::Number(n) => match n.as_f64() {
                    Some(f)
                        if n.is_f64() && f.fract() == 0.0 && f.abs() < 9_007_199_254_740_992.0 =>
                    {
                        #[allow(clippy::cast_possible_truncation)]
                        Value::from(f as i64)
                    }
                    _ => value.clone(),
                },
                Value::Array(a) => Value::Array(a.iter().map(Self::as_chrome_returns).collect()),
                Value::Object(o) => Value::Object(
                    o.iter()
                        .map(|(k, v)| (k.clone(), Self::as_chrome_returns(v)))
                        .collect(),
                ),
                _ => value.clone(),
            }
        }

        pub fn dump(&self, area: Area) -> Map<String, Value> {
            self.areas.borrow().get(&area).cloned().unwrap_or_default()
        }

        /// The URL of every `fetch` made so far, in order.
        pub fn fetched_urls(&self) -> Vec<String> {
            self.fetched
                .borrow()
                .iter()
                .map(|r| r.url.clone())
                .collect()
        }
    }

    impl Storage for MemoryEnv {
        async fn get(&self, area: Area, keys: &[&str]) -> Result<Map<String, Value>, EnvError> {
            for _ in 0..self.get_yields.get() {
                yield_now().await;
            }
            self.get_log
                .borrow_mut()
                .push(keys.iter().map(|&k| k.to_owned()).collect());
            if keys.iter().any(|k| {
                self.fail_gets
                    .borrow()
                    .iter()
                    .any(|f| k.starts_with(f.as_str()))
            }) {
                return Err(EnvError("storage read failed (test)".into()));
            }
            let areas = self.areas.borrow();
            let mut out = Map::new();
            if let Some(m) = areas.get(&area) {
                for k in keys {
                    if let Some(v) = m.get(*k) {
                        out.insert((*k).to_owned(), v.clone());
                    }
                }
            }
            Ok(out)
        }

        async fn set(&self, area: Area, items: Map<String, Value>) -> Result<(), EnvError> {
            if area == Area::Session {
                for _ in 0..self.session_set_yields.get() {
                    yield_now().await;
                }
                if let Some(msg) = self.fail_session_writes.borrow().clone() {
                    return Err(EnvError(msg));
                }
            }
            if let Some(msg) = self.fail_writes.borrow().clone() {
                return Err(EnvError(msg));
            }
            if area == Area::Local {
                if self.lose_api_on_local_set.get() {
                    self.user_scripts.set(false);
                }
                if let Some(msg) = self.fail_local_writes.borrow().clone() {
                    return Err(EnvError(msg));
                }
                if items
                    .keys()
                    .any(|k| self.fail_local_sets_holding.borrow().contains(k))
                {
                    return Err(EnvError("QUOTA_BYTES quota exceeded (test)".into()));
                }
                if self.enforce_quota.get() {
                    use crate::scripts::quota::{bytes_after, QUOTA_BYTES};
                    let areas = self.areas.borrow();
                    let empty = Map::new();
                    let all = areas.get(&Area::Local).unwrap_or(&empty);
                    let (_, after) = bytes_after(all, &items);
                    if after > QUOTA_BYTES {
                        return Err(EnvError(
                            "Resource::kQuotaBytes quota exceeded (test)".into(),
                        ));
                    }
                }
            }
            self.storage_log
                .borrow_mut()
                .push((area, items.keys().cloned().collect()));
            let mut areas = self.areas.borrow_mut();
            let m = areas.entry(area).or_default();
            for (k, v) in items {
                m.insert(k, v);
            }
            Ok(())
        }

        async fn get_all(&self, area: Area) -> Result<Map<String, Value>, EnvError> {
            let all = self.dump(area);
            // Its answer comes a while after it read: what else is in flight may write before
            // the caller acts on what it read.
            for _ in 0..self.get_yields.get() {
                yield_now().await;
            }
            Ok(all)
        }

        async fn keys(&self, area: Area) -> Result<Vec<String>, EnvError> {
            Ok(self.dump(area).keys().cloned().collect())
        }

        async fn bytes_in_use(&self, area: Area, keys: Option<&[&str]>) -> Result<usize, EnvError> {
            use crate::scripts::quota::item_bytes;
            let areas = self.areas.borrow();
            let Some(all) = areas.get(&area) else {
                return Ok(0);
            };
            Ok(all
                .iter()
                .filter(|(k, _)| keys.is_none_or(|ks| ks.contains(&k.as_str())))
                .map(|(k, v)| item_bytes(k, v))
                .fold(0, usize::saturating_add))
        }

        async fn remove(&self, area: Area, keys: &[&str]) -> Result<(), EnvError> {
            if let Some(msg) = self.fail_writes.borrow().clone() {
                return Err(EnvError(msg));
            }
            self.storage_log
                .borrow_mut()
                .push((area, keys.iter().map(|&k| k.to_owned()).collect()));
            if let Some(m) = self.areas.borrow_mut().get_mut(&area) {
                for k in keys {
                    m.remove(*k);
                }
            }
            Ok(())
        }
    }

    impl Clock for MemoryEnv {
        fn now_ms(&self) -> f64 {
            self.now.get()
        }
    }

    impl Capabilities for MemoryEnv {
        fn user_scripts_available(&self) -> bool {
            self.toggle_checks.set(self.toggle_checks.get() + 1);
            self.user_scripts.get()
        }
    }

    impl Timer for MemoryEnv {
        async fn sleep(&self, ms: f64) {
            if self.timers_fire.get() {
                self.advance(ms);
            } else {
                futures::future::pending::<()>().await;
            }
        }
    }

    impl Http for MemoryEnv {
        async fn fetch(
            &self,
            req: &HttpRequest,
            max_body: usize,
        ) -> Result<HttpResponse, FetchError> {
            self.fetch_held(req, max_body, None, None).await
        }
        /// A held URL reports 3 of 10 bytes before it waits forever; an answer's body is
        /// reported before it is kept (in chunks of `fetch_chunk` bytes, yielding between them,
        /// when that is set), and a refused chunk ends the fetch with an error.
        async fn fetch_progress(
            &self,
            req: &HttpRequest,
            max_body: usize,
            progress: &dyn Fn(u64, Option<u64>) -> Hold,
            head: &dyn Fn(&HttpResponse),
        ) -> Result<HttpResponse, FetchError> {
            self.fetch_held(req, max_body, Some(progress), Some(head))
                .await
        }
    }

    impl MemoryEnv {
        /// Answers 200 with the request's URL as the body, and records the request.
        async fn fetch_held(
            &self,
            req: &HttpRequest,
            max_body: usize,
            progress: Option<&dyn Fn(u64, Option<u64>) -> Hold>,
            head: Option<&dyn Fn(&HttpResponse)>,
        ) -> Result<HttpResponse, FetchError> {
            self.fetched.borrow_mut().push(req.clone());
            self.advance(self.fetch_ms.get());
            for _ in 0..self.fetch_yields.get() {
                yield_now().await;
            }
            if self.http_hold.borrow().contains(&req.url) {
                if let Some(p) = progress {
                    let _ = super::hold_bytes(p, 3, Some(10)).await;
                }
                struct Dropped(std::rc::Rc<Cell<u32>>);
                impl Drop for Dropped {
                    fn drop(&mut self) {
                        self.0.set(self.0.get().saturating_add(1));
                    }
                }
                let _d = Dropped(self.fetch_dropped.clone());
                futures::future::pending::<()>().await;
            }
            let answer = self.http_answers.borrow().get(&req.url).cloned();
            let r = match answer {
                Some(a) => a?,
                None => HttpResponse {
                    status: 200,
                    status_text: "OK".into(),
                    final_url: req.url.clone(),
                    headers: vec![("x-test".into(), "yes".into())],
                    body: req.url.clone().into_bytes(),
                    location: None,
                },
            };
            // The shell stops reading past the bound (`chrome::env::read_body`).
            if let (Some(h), None) = (head, &r.location) {
                h(&HttpResponse {
                    body: Vec::new(),
                    ..r.clone()
                });
            }
            if r.body.len() > max_body {
                return Err(FetchError::TooLarge { max: max_body });
            }
            if let Some(p) = progress {
                let len = r.body.len();
                let total = u64::try_from(len).ok();
                let step = match self.fetch_chunk.get() {
                    0 => len.max(1),
                    n => n,
                };
                let mut loaded = 0usize;
                let stopped = || FetchError::Other("the body was not read to its end".into());
                if !self.fetch_unsized.get() && !super::hold_bytes(p, 0, total).await {
                    return Err(stopped());
                }
                let total = total.filter(|_| !self.fetch_unsized.get());
                while loaded < len {
                    loaded = loaded.saturating_add(step).min(len);
                    if !super::hold_bytes(p, u64::try_from(loaded).unwrap_or(u64::MAX), total).await
                    {
                        return Err(stopped());
                    }
                    if self.fetch_chunk.get() > 0 {
                        yield_now().await;
                    }
                }
            }
            Ok(r)
        }
    }

    impl Tabs for MemoryEnv {
        async fn tabs(&self) -> Result<Vec<Tab>, EnvError> {
            for _ in 0..self.tab_query_yields.get() {
                yield_now().await;
            }
            self.tab_calls.borrow_mut().push("query".into());
            Ok(self.tabs.borrow().clone())
        }

        async fn tab(&self, id: i64) -> Result<Tab, EnvError> {
            for _ in 0..self.tab_get_yields.get() {
                yield_now().await;
            }
            self.tab_calls.borrow_mut().push(format!("get {id}"));
            if let Some(e) = self.tab_error.borrow().clone() {
                return Err(EnvError(e));
            }
            self.tabs
                .borrow()
                .iter()
                .find(|t| t.id == id)
                .cloned()
                .ok_or_else(|| EnvError(format!("No tab with id: {id}.")))
        }

        async fn frame_urls(&self, tab_id: i64) -> Result<Vec<String>, EnvError> {
            self.tab_calls.borrow_mut().push(format!("frames {tab_id}"));
            Ok(self
                .frames
                .borrow()
                .get(&tab_id)
                .cloned()
                .unwrap_or_default())
        }

        async fn document(&self, id: &str) -> Result<DocumentState, EnvError> {
            self.tab_calls.borrow_mut().push(format!("document {id}"));
            Ok(self
                .documents
                .borrow()
                .get(id)
                .copied()
                .unwrap_or(DocumentState::Active))
        }

        async fn execute(
            &self,
            tab_id: i64,
            all_frames: bool,
            world: &str,
            codes: &[String],
        ) -> Result<Value, EnvError> {
            self.api()?;
            // In the registry's calls too, so a test sees it after the world's configuration.
            self.registry_calls.borrow_mut().push("execute");
            // The entries joined, so a test reads the code it ran as one text.
            self.executed.borrow_mut().push((
                tab_id,
                all_frames,
                world.to_owned(),
                codes.join("\n"),
            ));
            for _ in 0..self.execute_yields.get() {
                yield_now().await;
            }
            let answer = self.execute_answer.borrow().clone();
            match answer {
                Some(r) => r.map_err(EnvError),
                None => futures::future::pending().await,
            }
        }
    }

    impl Ids for MemoryEnv {
        fn new_uuid(&self) -> String {
            let n = self.uuid_counter.get() + 1;
            self.uuid_counter.set(n);
            format!("00000000-0000-4000-8000-{n:012x}")
        }
    }

    impl MemoryEnv {
        fn api(&self) -> Result<(), EnvError> {
            if self.user_scripts.get() {
                Ok(())
            } else {
                Err(EnvError("chrome.userScripts is not available".into()))
            }
        }
    }

    impl MemoryEnv {
        /// Chrome's refusal of a whole `register` or `update` holding an id of `refuse_ids`.
        fn refused_id(&self, regs: &[Registration]) -> Result<(), EnvError> {
            match regs
                .iter()
                .find(|r| self.refuse_ids.borrow().contains(&r.id))
            {
                Some(r) => Err(EnvError(format!(
                    "Script with ID '{}' has invalid value for matches[0]",
                    r.id
                ))),
                None => Ok(()),
            }
        }

        /// Chrome 156: at most 100 world configurations, and with 100 held not even the default
        /// world can be configured (measured); a world already held can be configured again.
        fn world_limit(&self, world: Option<&str>) -> Result<(), EnvError> {
            let worlds = self.worlds.borrow();
            // The default world's configuration counts among the 100 (Chromium 156).
            let default = self.default_world.get().is_some();
            let held = match world {
                Some(w) => worlds.contains_key(w),
                None => default,
            };
            if held || worlds.len() + usize::from(default) < 100 {
                return Ok(());
            }
            Err(EnvError(
                "You may only configure up to 100 individual user script worlds.".into(),
            ))
        }
    }

    /// Mirrors Chrome: register fails on a duplicate id, update and unregister on a missing one.
    impl UserScripts for MemoryEnv {
        async fn registered(&self, ids: Option<&[String]>) -> Result<Vec<Registration>, EnvError> {
            self.api()?;
            let regs = self.registrations.borrow();
            Ok(regs
                .values()
                .filter(|r| ids.is_none_or(|ids| ids.contains(&r.id)))
                .cloned()
                .collect())
        }

        async fn register(&self, regs: &[Registration]) -> Result<(), EnvError> {
            self.api()?;
            self.registry_calls.borrow_mut().push("register");
            if self.lose_api_on_register.get() {
                self.user_scripts.set(false);
                return Err(EnvError("Extension context invalidated".into()));
            }
            if let Some(m) = self.refuse_register.borrow().clone() {
                return Err(EnvError(m));
            }
            self.refused_id(regs)?;
            let mut map = self.registrations.borrow_mut();
            if let Some(r) = regs.iter().find(|r| map.contains_key(&r.id)) {
                return Err(EnvError(format!("Duplicate script ID '{}'", r.id)));
            }
            for r in regs {
                map.insert(r.id.clone(), r.clone());
            }
            Ok(())
        }

        async fn update(&self, regs: &[Registration]) -> Result<(), EnvError> {
            self.api()?;
            for _ in 0..self.update_yields.get() {
                yield_now().await;
            }
            self.updated_after
                .borrow_mut()
                .push(self.storage_log.borrow().len());
            self.registry_calls.borrow_mut().push("update");
            if let Some(m) = self.refuse_register.borrow().clone() {
                return Err(EnvError(m));
            }
            self.refused_id(regs)?;
            let mut map = self.registrations.borrow_mut();
            if let Some(r) = regs.iter().find(|r| !map.contains_key(&r.id)) {
                return Err(EnvError(format!("No script with ID '{}'", r.id)));
            }
            // Chromium 156's `update`: a field not given is kept, and so is a glob list given
            // empty (it cannot be cleared this way).
            for r in regs {
                let Some(old) = map.get_mut(&r.id) else {
                    continue;
                };
                let mut new = r.clone();
                if new.run_at.is_none() {
                    new.run_at.clone_from(&old.run_at);
                }
                if new.world.is_none() {
                    new.world.clone_from(&old.world);
                }
                if new.world_id.is_none() {
                    new.world_id.clone_from(&old.world_id);
                }
                if new.include_globs.is_empty() {
                    new.include_globs.clone_from(&old.include_globs);
                }
                if new.exclude_globs.is_empty() {
                    new.exclude_globs.clone_from(&old.exclude_globs);
                }
                *old = new;
            }
            Ok(())
        }

        async fn unregister(&self, ids: &[String]) -> Result<(), EnvError> {
            self.api()?;
            self.registry_calls.borrow_mut().push("unregister");
            let mut map = self.registrations.borrow_mut();
            // Chromium 156 refuses the whole call for one id it does not hold.
            if let Some(id) = ids.iter().find(|id| !map.contains_key(*id)) {
                return Err(EnvError(format!("Nonexistent script ID '{id}'")));
            }
            for id in ids {
                map.remove(id);
            }
            Ok(())
        }

        async fn configure_world(&self) -> Result<(), EnvError> {
            self.api()?;
            self.world_limit(None)?;
            self.default_world.set(Some(true));
            self.default_configured
                .set(self.default_configured.get() + 1);
            Ok(())
        }

        async fn world_configurations(&self) -> Result<Vec<WorldConfig>, EnvError> {
            self.api()?;
            self.world_reads.set(self.world_reads.get() + 1);
            let csp = |with: bool| with.then(|| crate::env::WORLD_CSP.to_owned());
            let default = self.default_world.get().map(|with| WorldConfig {
                world_id: None,
                messaging: Some(false),
                csp: csp(with),
            });
            Ok(default
                .into_iter()
                .chain(
                    self.worlds
                        .borrow()
                        .iter()
                        .map(|(id, &messaging)| WorldConfig {
                            world_id: Some(id.clone()),
                            messaging: Some(messaging),
                            csp: csp(!self.worlds_other_csp.borrow().contains(id)),
                        }),
                )
                .collect())
        }

        async fn configure_script_world(
            &self,
            world_id: &str,
            messaging: bool,
        ) -> Result<(), EnvError> {
            self.api()?;
            self.world_limit(Some(world_id))?;
            self.registry_calls.borrow_mut().push("configureWorld");
            self.worlds
                .borrow_mut()
                .insert(world_id.to_owned(), messaging);
            self.worlds_other_csp.borrow_mut().remove(world_id);
            Ok(())
        }

        async fn reset_script_world(&self, world_id: &str) -> Result<(), EnvError> {
            self.api()?;
            self.registry_calls
                .borrow_mut()
                .push("resetWorldConfiguration");
            self.worlds.borrow_mut().remove(world_id);
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elapsed_is_whole_milliseconds_and_never_negative() {
        assert_eq!(elapsed_ms(1_250.9, 1_000.0), 250);
        assert_eq!(elapsed_ms(1_000.0, 1_250.0), 0);
        assert_eq!(elapsed_ms(f64::NAN, 0.0), 0);
        assert_eq!(elapsed_ms(f64::INFINITY, 0.0), 1_000_000_000_000);
    }

    #[test]
    fn storage_areas_are_named_as_chrome_names_them() {
        assert_eq!(Area::parse("local"), Some(Area::Local));
        assert_eq!(Area::parse("session"), Some(Area::Session));
        assert_eq!(Area::parse("sync"), None);
        assert_eq!(Area::parse("managed"), None);
    }

    #[test]
    fn long_waits_are_stepped_with_a_keepalive_between_steps() {
        let steps: Vec<_> = sleep_steps(50_000.0).collect();
        assert_eq!(
            steps,
            vec![(20_000.0, true), (20_000.0, true), (10_000.0, false)]
        );
        assert_eq!(
            sleep_steps(20_000.0).collect::<Vec<_>>(),
            vec![(20_000.0, false)]
        );
        assert_eq!(sleep_steps(0.0).count(), 0);
        assert_eq!(sleep_steps(-5.0).count(), 0);
        assert_eq!(sleep_steps(f64::NAN).count(), 0);
        assert_eq!(timer_ms(f64::NAN), 0);
        assert_eq!(timer_ms(-1.0), 0);
        assert_eq!(timer_ms(100.7), 100);
        assert_eq!(timer_ms(1e300), 2_147_483_647);
    }
}

#[cfg(test)]
mod availability_tests {
    use super::availability_from;

    /// The messages Chromium 156 throws, word for word (a provider page, toggle on, then off).
    #[test]
    fn chromes_synchronous_refusals_tell_the_toggle() {
        let on = "Error in invocation of userScripts.getScripts(optional userScripts.UserScriptFilter filter, optional function callback): No matching signature.";
        let off = "'userScripts.getScripts' is not available in this context.";
        assert_eq!(availability_from(on), Some(true));
        assert_eq!(availability_from(off), Some(false));
        assert_eq!(availability_from("Extension context invalidated."), None);
        assert_eq!(availability_from(""), None);
    }
}
