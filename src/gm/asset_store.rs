//! A script's `@require`/`@resource` files at write time and at registration: fetched through the
//! env's `Http` (the shell's `fetch`) for the URLs `assets::plan` says are new, checked by
//! `assets::verify`, and handed to the write as items of its one `set` — so a refusal stores
//! nothing, and a stored record never names bytes that are not stored. The fetches of one write
//! — of one script, or of every script of an import — share one [`Fetches`]: one budget of
//! time, and each URL asked once.

use super::assets::{
    self, Answer, Asset, AssetError, Step, Wanted, FETCH_TIMEOUT_MS, WRITE_FETCH_BUDGET_MS,
};
use crate::env::{elapsed_ms, Area, Clock, FetchError, Http, HttpRequest, HttpResponse, Storage};
use crate::scripts::history;
use crate::scripts::metadata::Metadata;
use crate::vec_map::{VecMap, VecSet};
use crate::web::WebPlatform;
use serde_json::{Map, Value};
use std::rc::Rc;

/// The files of a script about to be stored: its record's list, and the bytes not stored yet
/// (`asset/<sha256>` → base64), to go into the write's `set`.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Prepared {
    pub assets: Vec<Asset>,
    pub items: Map<String, Value>,
}

/// The fetches of one write: one budget of time for all of them, and each URL (as fetched: the
/// browser's serialization, without the fragment) asked once, its answer checked again for
/// every script and line that names it. An import of 2,000 scripts naming one library asked
/// for it 2,000 times, each script with a budget of its own — hours under the write lock for a
/// hostile file; now the import's fetches end with one budget.
pub struct Fetches {
    started: f64,
    budget_ms: u64,
    /// Whose budget it is, for the message when it runs out ("write", "import").
    of: &'static str,
    answers: VecMap<String, Rc<Answer>>,
    /// The bodies by sha256: URLs that answer the same bytes hold them once.
    bodies: VecMap<String, Rc<Vec<u8>>>,
    /// Blob keys already handed to an earlier script of this write (in its items, or found
    /// stored): not encoded, looked up or handed again.
    handed: VecSet<String>,
}

impl Fetches {
    /// A budget of `budget_ms` from `now_ms`.
    pub fn new(now_ms: f64, budget_ms: u64, of: &'static str) -> Fetches {
        Fetches {
            started: now_ms,
            budget_ms,
            of,
            answers: VecMap::new(),
            bodies: VecMap::new(),
            handed: VecSet::new(),
        }
    }

    /// What `w`'s URL answered: asked now (its redirects judged one by one), or the answer an
    /// earlier line of this write got.
    async fn answer<E: Http + Clock>(
        &mut self,
        env: &E,
        web: &dyn WebPlatform,
        w: &Wanted,
    ) -> Result<Rc<Answer>, AssetError> {
        if let Some(a) = self.answers.get(&w.fetch_url) {
            return Ok(a.clone());
        }
        let what = || match &w.name {
            None => format!("@require {}", w.url),
            Some(n) => format!("@resource {n} {}", w.url),
        };
        let left = self
            .budget_ms
            .saturating_sub(elapsed_ms(env.now_ms(), self.started));
        if left == 0 {
            return Err(AssetError::Fetch {
                what: what(),
                why: format!(
                    "the {}'s {} s for fetching files ran out",
                    self.of,
                    self.budget_ms / 1000
                ),
            });
        }
        // One timeout for the file across its redirects, within the write's budget.
        let deadline = FETCH_TIMEOUT_MS.min(left);
        let mut req = HttpRequest {
            method: "GET".into(),
            url: w.fetch_url.clone(),
            headers: Vec::new(),
            body: None,
            timeout_ms: deadline,
            anonymous: true,
            browser_headers: Vec::new(),
        };
        let file_started = env.now_ms();
        let mut hops = 0;
        let resp = loop {
            req.timeout_ms = deadline.saturating_sub(elapsed_ms(env.now_ms(), file_started));
            let fetched = if req.timeout_ms == 0 {
                Err(FetchError::Timeout)
            } else {
                // One byte over the bound tells "too large" from "exactly the bound".
                env.fetch(&req, assets::MAX_ASSET_BYTES.saturating_add(1))
                    .await
            };
            let resp = fetched.map_err(|e| match e {
                // The browser stopped reading past the bound: the file is too large.
                FetchError::TooLarge { .. } => AssetError::TooLarge { what: w.label() },
                e => AssetError::Fetch {
                    what: what(),
                    why: crate::text::ellipsize(&e.to_string(), 200),
                },
            })?;
            // The browser follows no redirect: each hop is judged before it is asked.
            match &resp.location {
                Some(to) => {
                    req.url = assets::follow(web, w, &req.url, to, hops)?;
                    hops += 1;
                }
                None => break resp,
            }
        };
        let sha256 = crate::guard::digest::sha256_hex(&resp.body);
        let body = match self.bodies.get(&sha256) {
            Some(b) => b.clone(),
            None => {
                let b = Rc::new(resp.body);
                self.bodies.insert(sha256.clone(), b.clone());
                b
            }
        };
        let answer = Rc::new(Answer {
            status: resp.status,
            final_url: resp.final_url,
            headers: resp.headers,
            body,
            sha256,
        });
        self.answers.insert(w.fetch_url.clone(), answer.clone());
        Ok(answer)
    }
}

/// The answers fetched to show a write's review, by URL as fetched, and the bytes it showed (a
/// restore's stored copies too). The write approved from that review is served these answers
/// ([`Reviewed::serve`]) and asks the network for nothing: the bytes the user read are the
/// bytes stored, even if the server answers otherwise by then.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Reviewed {
    answers: VecMap<String, Rc<Answer>>,
    bodies: VecMap<String, Rc<Vec<u8>>>,
}

impl Reviewed {
    /// The answer the review got for `req`'s URL, as the network would give it after its
    /// redirects. A URL the review did not fetch is refused: it was not shown.
    pub fn serve(&self, req: &HttpRequest) -> Result<HttpResponse, FetchError> {
        let a = self.answers.get(&req.url).ok_or_else(|| {
            FetchError::Other(
                "this file was not fetched for the review, so it was not shown; nothing is fetched after an approval"
                    .to_owned(),
            )
        })?;
        Ok(HttpResponse {
            status: a.status,
            status_text: String::new(),
            final_url: a.final_url.clone(),
            headers: a.headers.clone(),
            body: a.body.as_ref().clone(),
            location: None,
        })
    }

    /// The bytes with this sha256, as the review fetched them.
    pub fn body(&self, sha256: &str) -> Option<&[u8]> {
        self.bodies.get(sha256).map(|b| b.as_slice())
    }

    /// The bytes it holds (each body once), for the bound on what waiting reviews hold.
    pub fn bytes(&self) -> usize {
        self.bodies.values().map(|b| b.len()).sum()
    }
}

/// The files a write adds to a script that holds `before`, for its review: those `meta` names
/// that `before` does not, with their bytes — fetched as the write fetches them (planned from
/// `plan_from`, the list the write plans from: a restore's revision's), checked as it checks
/// them (a file the write would refuse fails here, before the user is asked; the storage quota
/// is asked at the write), or, where the
/// write reuses a stored copy (a restore), that copy; and the answers, for the approved write to
/// take ([`Reviewed`]).
pub async fn fetch_for_review<E: Storage + Http + Clock>(
    env: &E,
    meta: &Metadata,
    plan_from: &[Asset],
    before: &[Asset],
) -> Result<(Vec<(Asset, Rc<Vec<u8>>)>, Reviewed), AssetError> {
    let mut fetches = Fetches::new(env.now_ms(), WRITE_FETCH_BUDGET_MS, "review");
    let prepared = prepare_in(env, meta, plan_from, &mut fetches).await?;
    let new: Vec<Asset> = prepared
        .assets
        .into_iter()
        .filter(|a| !before.contains(a))
        .collect();
    // The copies the write reuses, read as a registration reads them (sha256 and pins held).
    let reused: Vec<Asset> = new
        .iter()
        .filter(|a| !fetches.bodies.contains_key(&a.sha256))
        .cloned()
        .collect();
    let stored = load(env, &reused)
        .await
        .map_err(|e| AssetError::Storage(e.0))?;
    let mut out = Vec::with_capacity(new.len());
    for a in new {
        let body = match fetches.bodies.get(&a.sha256) {
            Some(b) => b.clone(),
            None => match stored.iter().find(|(s, _)| s.sha256 == a.sha256) {
                Some((_, Some(b))) => {
                    let b = Rc::new(b.clone());
                    // Held with the answers: the review shows it whole on request.
                    fetches.bodies.insert(a.sha256.clone(), b.clone());
                    b
                }
                _ => {
                    return Err(AssetError::Storage(format!(
                        "the stored copy of {} could not be read",
                        a.url
                    )))
                }
            },
        };
        out.push((a, body));
    }
    Ok((
        out,
        Reviewed {
            answers: fetches.answers,
            bodies: fetches.bodies,
        },
    ))
}

/// Fetches what `meta` names that `current` (the script's stored list) does not hold, one after
/// the other, within [`WRITE_FETCH_BUDGET_MS`] in all.
pub async fn prepare<E: Storage + Http + Clock>(
    env: &E,
    meta: &Metadata,
    current: &[Asset],
) -> Result<Prepared, AssetError> {
    let mut fetches = Fetches::new(env.now_ms(), WRITE_FETCH_BUDGET_MS, "write");
    prepare_in(env, meta, current, &mut fetches).await
}

/// [`prepare`] as one script of a write of several (an import): within `fetches`' budget, a
/// URL an earlier script fetched is not fetched again, and bytes already handed to an earlier
/// script are not in this one's items (they are in the write's `set` already, or stored).
pub async fn prepare_in<E: Storage + Http + Clock>(
    env: &E,
    meta: &Metadata,
    current: &[Asset],
    fetches: &mut Fetches,
) -> Result<Prepared, AssetError> {
    let web = crate::web::platform();
    let steps = assets::plan(
        assets::wanted(web, &meta.requires, &meta.resources)?,
        current,
    );
    let mut out = Prepared::default();
    for step in steps {
        let step = match step {
            Step::Check(a, w) => {
                let key = assets::blob_key(&a.sha256);
                let stored = env
                    .get(Area::Local, &[key.as_str()])
                    .await
                    .map_err(|e| AssetError::Storage(e.0))?;
                let bytes = stored
                    .get(&key)
                    .and_then(serde_json::Value::as_str)
                    .and_then(assets::decode);
                if bytes.is_some_and(|b| assets::pins_hold(&w, &b)) {
                    Step::Reuse(a)
                } else {
                    Step::Fetch(w)
                }
            }
            other => other,
        };
        match step {
            Step::Reuse(a) => out.assets.push(a),
            Step::Check(..) => {}
            Step::Fetch(w) => {
                let answer = fetches.answer(env, web, &w).await?;
                let a = assets::verify(web, &w, &answer)?;
                let key = assets::blob_key(&a.sha256);
                if !fetches.handed.contains(&key) && !out.items.contains_key(&key) {
                    out.items.insert(key, assets::encode(&answer.body).into());
                }
                out.assets.push(a);
            }
        }
        assets::check_total(&out.assets)?;
    }
    // Bytes already stored (another revision or script has them) are not written again.
    if !out.items.is_empty() {
        let keys: Vec<&str> = out.items.keys().map(String::as_str).collect();
        let have = env
            .get(Area::Local, &keys)
            .await
            .map_err(|e| AssetError::Storage(e.0))?;
        out.items.retain(|k, _| !have.contains_key(k));
        for k in out.items.keys().chain(have.keys()) {
            fetches.handed.insert(k.clone());
        }
    }
    Ok(out)
}

/// Refuses a `set` of `items` that would take `chrome.storage.local` past the import's bound
/// (its quota less the headroom); only asked when new bytes are stored (the write lock held).
/// Before refusing, the files nothing names any more are removed ([`sweep`]) and the bound is
/// asked again: the revisions that pinned them leave the history at writes, which do not sweep.
pub async fn check_quota<S: Storage>(s: &S, items: &Map<String, Value>) -> Result<(), AssetError> {
    use crate::scripts::quota::{bytes_after, HEADROOM_BYTES, QUOTA_BYTES};
    let limit = QUOTA_BYTES.saturating_sub(HEADROOM_BYTES);
    let mut swept = false;
    loop {
        let all = s
            .get_all(Area::Local)
            .await
            .map_err(|e| AssetError::Storage(e.0))?;
        let (_, needed) = bytes_after(&all, items);
        if needed <= limit {
            return Ok(());
        }
        if swept || !matches!(sweep_keeping(s, items).await, Ok(n) if n > 0) {
            return Err(AssetError::Quota { needed, limit });
        }
        swept = true;
    }
}

/// The bytes of `list` as stored (a missing or damaged blob is `None`: the registration then
/// leaves that file out and the script runs without it, and says so). So are bytes that lack a
/// hash their URL names: a file stored by a version that did not read that pin (`#sha-256=`
/// was not read before) does not run unchecked. A read that fails is an error, not "missing":
/// registered from it, the script would run without its library for good.
pub async fn load<S: Storage>(
    s: &S,
    list: &[Asset],
) -> Result<Vec<(Asset, Option<Vec<u8>>)>, crate::env::EnvError> {
    if list.is_empty() {
        return Ok(Vec::new());
    }
    let keys: Vec<String> = list.iter().map(|a| assets::blob_key(&a.sha256)).collect();
    let refs: Vec<&str> = keys.iter().map(String::as_str).collect();
    let got = s.get(Area::Local, &refs).await?;
    Ok(list
        .iter()
        .zip(&keys)
        .map(|(a, k)| {
            let bytes = got
                .get(k)
                .and_then(Value::as_str)
                .and_then(assets::decode)
                .filter(|b| crate::guard::digest::sha256_hex(b) == a.sha256)
                .filter(|b| assets::url_pins_hold(&a.url, b));
            (a.clone(), bytes)
        })
        .collect())
}

/// Every sha256 some stored record, revision or trash entry names (under an `assets` list at
/// any depth of those values).
fn referenced(all: &Map<String, Value>) -> VecSet<String> {
    let mut out = VecSet::new();
    let mut stack: Vec<&Value> = all
        .iter()
        .filter(|(k, _)| {
            k.starts_with("script/") || k.starts_with("history/") || k.starts_with("trash/")
        })
        .map(|(_, v)| v)
        .collect();
    // Iterative, so a deep value cannot exhaust the stack.
    while let Some(v) = stack.pop() {
        match v {
            Value::Object(o) => {
                if let Some(Value::Array(list)) = o.get("assets") {
                    for a in list {
                        if let Some(s) = a.get("sha256").and_then(Value::as_str) {
                            out.insert(s.to_owned());
                        }
                    }
                }
                stack.extend(o.values());
            }
            Value::Array(a) => stack.extend(a.iter()),
            _ => {}
        }
    }
    out
}

/// Removes the stored bytes nothing reachable names any more: the revisions no history index
/// lists ([`history::orphans`]), then the files no record, revision or trash entry names. Run
/// when the trash is purged and before a write is refused for the quota ([`check_quota`]), the
/// write lock held.
pub async fn sweep<S: Storage>(s: &S) -> Result<usize, crate::env::EnvError> {
    sweep_keeping(s, &Map::new()).await
}

/// [`sweep`], keeping too the files `pending` (a write's `set`, not stored yet) names: its record
/// may reuse a file stored earlier that nothing stored names any more (a reviewer's case: the
/// sweep before the quota check removed it, and the script then ran without its library).
async fn sweep_keeping<S: Storage>(
    s: &S,
    pending: &Map<String, Value>,
) -> Result<usize, crate::env::EnvError> {
    let mut all = s.get_all(Area::Local).await?;
    let orphans = history::orphans(&all);
    for k in &orphans {
        all.remove(k);
    }
    let mut used = referenced(&all);
    for sha in referenced(pending).iter() {
        used.insert(sha.clone());
    }
    let unused: Vec<&str> = all
        .keys()
        .filter(|k| {
            k.strip_prefix("asset/")
                .is_some_and(|sha| !used.contains(sha))
        })
        .map(String::as_str)
        .chain(orphans.iter().map(String::as_str))
        .collect();
    if !unused.is_empty() {
        s.remove(Area::Local, &unused).await?;
    }
    Ok(unused.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::memory::MemoryEnv;
    use crate::scripts::metadata::Metadata;
    use futures::executor::block_on;
    use serde_json::json;

    #[test]
    fn a_redirect_is_fetched_only_once_judged_and_nothing_is_asked_where_it_may_not_go() {
        let env = MemoryEnv::new();
        let redirect = |to: &str| {
            Ok(crate::env::HttpResponse {
                status: 302,
                status_text: String::new(),
                final_url: String::new(),
                headers: Vec::new(),
                body: Vec::new(),
                location: Some(to.into()),
            })
        };
        for (from, to) in [
            ("https://cdn.test/a.js", "https://b.test/a.js"),
            ("https://b.test/a.js", "https://c.test/a.js"),
            ("https://cdn.test/in.js", "http://127.0.0.1:9222/json"),
            ("https://cdn.test/lan.js", "http://192.168.1.1/cfg"),
            ("https://cdn.test/loop.js", "https://cdn.test/loop.js"),
        ] {
            env.http_answers
                .borrow_mut()
                .insert(from.into(), redirect(to));
        }
        let meta = |url: &str| Metadata {
            requires: vec![url.to_owned()],
            ..Metadata::default()
        };
        let asked =
            || -> Vec<String> { env.fetched.borrow_mut().drain(..).map(|r| r.url).collect() };
        // Within the rules: each hop asked in turn; the bytes are the last one's, and the record
        // says where they came from.
        let p = block_on(prepare(&env, &meta("https://cdn.test/a.js"), &[])).unwrap();
        assert_eq!(
            asked(),
            [
                "https://cdn.test/a.js",
                "https://b.test/a.js",
                "https://c.test/a.js"
            ]
        );
        assert_eq!(
            p.assets[0].final_url.as_deref(),
            Some("https://c.test/a.js")
        );
        assert_eq!(p.assets[0].size, "https://c.test/a.js".len());
        // Onto this computer, or into the network in the clear: refused, and never asked.
        for (url, to) in [
            ("https://cdn.test/in.js", "http://127.0.0.1:9222/json"),
            ("https://cdn.test/lan.js", "http://192.168.1.1/cfg"),
        ] {
            let e = block_on(prepare(&env, &meta(url), &[]))
                .unwrap_err()
                .to_string();
            assert!(
                e.contains(url) && e.contains(to) && e.contains("not followed"),
                "{e}"
            );
            assert_eq!(asked(), [url]);
        }
        // A loop ends at the bound.
        let e = block_on(prepare(&env, &meta("https://cdn.test/loop.js"), &[])).unwrap_err();
        assert!(e.to_string().contains("more than 20 redirects"), "{e}");
        assert_eq!(asked().len(), assets::MAX_REDIRECTS + 1);
    }

    /// A write of new files is not refused for the bytes of files nothing names any more (a
    /// history whose bounds let their revisions go): they are swept first. Named, they count.
    #[test]
    fn the_quota_is_asked_again_once_the_files_nothing_names_are_swept() {
        let env = MemoryEnv::new();
        let big = "a".repeat(6 * 1024 * 1024);
        let mut stored = Map::new();
        stored.insert("asset/old".into(), json!(big));
        block_on(env.set(Area::Local, stored)).unwrap();
        let mut items = Map::new();
        items.insert("asset/new".into(), json!("b".repeat(5 * 1024 * 1024)));
        block_on(check_quota(&env, &items)).unwrap();
        assert!(!env.dump(Area::Local).contains_key("asset/old"));
        // Named by a script: kept, and the write refused.
        let mut stored = Map::new();
        stored.insert("asset/old".into(), json!(big));
        stored.insert("script/u1".into(), json!({"assets": [{"sha256": "old"}]}));
        block_on(env.set(Area::Local, stored)).unwrap();
        let e = block_on(check_quota(&env, &items)).unwrap_err();
        assert!(matches!(e, AssetError::Quota { .. }), "{e:?}");
        assert!(env.dump(Area::Local).contains_key("asset/old"));
        // Named by nothing stored but by the write being checked (it reuses the stored file):
        // kept (a reviewer's case: it was swept, and the script ran without its library).
        block_on(env.remove(Area::Local, &["script/u1"])).unwrap();
        let mut reuse = items.clone();
        reuse.insert("script/u2".into(), json!({"assets": [{"sha256": "old"}]}));
        let _ = block_on(check_quota(&env, &reuse));
        assert!(env.dump(Area::Local).contains_key("asset/old"));
    }

    /// A file stored under a pin an earlier version did not read (`#sha-256=`): its bytes, which
    /// the record's own sha256 holds, are not registered unless they have the pin's hash.
    #[test]
    fn stored_bytes_are_held_to_their_urls_pins_when_loaded() {
        let env = MemoryEnv::new();
        let bytes = b"window.evil = 1;";
        let sha = crate::guard::digest::sha256_hex(bytes);
        let mut items = Map::new();
        items.insert(assets::blob_key(&sha), assets::encode(bytes).into());
        block_on(env.set(Area::Local, items)).unwrap();
        let asset = |url: String| Asset {
            url,
            name: None,
            sha256: sha.clone(),
            size: bytes.len(),
            mime: String::new(),
            final_url: None,
            charset: None,
        };
        let good = crate::guard::digest::sha256_hex(b"window.lib = 1;");
        let loaded = block_on(load(
            &env,
            &[
                asset(format!("https://cdn.test/l.js#sha-256={good}")),
                asset(format!("https://cdn.test/l.js#sha-256={sha}")),
            ],
        ))
        .unwrap();
        assert_eq!(loaded[0].1, None);
        assert_eq!(loaded[1].1.as_deref(), Some(&bytes[..]));
    }

    #[test]
    fn sweep_keeps_what_any_record_history_or_trash_names() {
        let env = MemoryEnv::new();
        let mut items = Map::new();
        for k in ["asset/aa", "asset/bb", "asset/cc", "asset/dd"] {
            items.insert(k.into(), json!("eA=="));
        }
        items.insert("script/u1".into(), json!({"assets": [{"sha256": "aa"}]}));
        items.insert(
            "history/u1".into(),
            json!({"revisions": [{"record": {"assets": [{"sha256": "bb"}]}}]}),
        );
        items.insert(
            "trash/u2".into(),
            json!({"record": {"assets": [{"sha256": "cc"}]}}),
        );
        items.insert("values/u3".into(), json!({"assets": [{"sha256": "dd"}]}));
        // A revision under a key of its own that its index lists, and one no index lists (an
        // interrupted change): the orphan goes, and with it the only name of its file.
        let u4 = "00000000-0000-4000-8000-000000000004";
        items.insert(
            history::history_key(u4),
            json!({"v": 2, "revisions": [{"revision": 1, "bytes": 1}]}),
        );
        for (n, sha) in [(1, "ee"), (2, "ff")] {
            items.insert(format!("asset/{sha}"), json!("eA=="));
            items.insert(
                history::revision_key(u4, n),
                json!({"record": {"assets": [{"sha256": sha}]}}),
            );
        }
        block_on(env.set(Area::Local, items)).unwrap();
        assert_eq!(block_on(sweep(&env)).unwrap(), 3);
        let left = env.dump(Area::Local);
        assert!(left.contains_key("asset/aa") && left.contains_key("asset/bb"));
        assert!(left.contains_key("asset/cc") && !left.contains_key("asset/dd"));
        assert!(left.contains_key("asset/ee") && !left.contains_key("asset/ff"));
        assert!(left.contains_key(&history::revision_key(u4, 1)));
        assert!(!left.contains_key(&history::revision_key(u4, 2)));
    }
}
