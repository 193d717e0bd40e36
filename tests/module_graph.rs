//! The module imports of `src/` (the core and the shell): no cycle between modules, and nothing
//! in the core imports the shell (`chrome`). Read from the source text: every `crate::…` and
//! `super::…` path (and `use crate::{a, b}` / `use super::{a, b}` groups) is an edge to the
//! deepest module it names. A parent naming its own children is the module tree, not an edge.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Cycles that exist and are known: each is one to break, never one to add to.
/// `scripts::metadata` validates rule syntax with helpers in `scripts::rules`, which compiles
/// `Metadata`; moving those helpers is left until the matching work in `rules.rs` has landed.
const KNOWN_CYCLES: &[&[&str]] = &[&["scripts/metadata", "scripts/rules"]];

fn modules() -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut dirs = vec![root.clone()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            if path.extension().and_then(|e| e.to_str()) != Some("rs") {
                continue;
            }
            let rel = path.strip_prefix(&root).unwrap().with_extension("");
            let mut parts: Vec<String> = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            let is_dir_module = matches!(parts.last().map(String::as_str), Some("mod" | "lib"));
            if is_dir_module {
                parts.pop();
            }
            let mut text = std::fs::read_to_string(&path).unwrap();
            // The module's own unit tests are not part of its imports.
            if let Some(i) = text.find("#[cfg(test)]\nmod tests") {
                text.truncate(i);
            }
            let text: String = text
                .lines()
                .map(|l| l.split("//").next().unwrap_or(""))
                .collect::<Vec<_>>()
                .join("\n");
            out.insert(parts.join("/"), text);
        }
    }
    out
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Every path after `crate::` or `super::` in `text`, as segments (a `{a, b}` group gives one
/// path per item), each with its base: `None` for `crate`, `Some(n)` for n `super`s.
fn paths(text: &str) -> Vec<(Option<usize>, Vec<String>)> {
    let mut out = Vec::new();
    for kw in ["crate::", "super::"] {
        let mut from = 0;
        while let Some(i) = text[from..].find(kw) {
            let start = from + i;
            from = start + kw.len();
            if start > 0 && text[..start].chars().next_back().is_some_and(is_ident) {
                continue;
            }
            let mut supers = usize::from(kw == "super::");
            let mut rest = &text[from..];
            while let Some(r) = rest.strip_prefix("super::") {
                supers += 1;
                rest = r;
            }
            let base = (kw == "super::").then_some(supers);
            let mut segs = Vec::new();
            loop {
                let ident: String = rest.chars().take_while(|c| is_ident(*c)).collect();
                if !ident.is_empty() {
                    rest = &rest[ident.len()..];
                    segs.push(ident);
                    if let Some(r) = rest.strip_prefix("::") {
                        rest = r;
                        continue;
                    }
                    out.push((base, segs));
                } else if let Some(group) = rest.strip_prefix('{') {
                    let inner = group.split('}').next().unwrap_or("");
                    for item in inner.split(',') {
                        let first = item.trim().split("::").next().unwrap_or("");
                        let first = first.split_whitespace().next().unwrap_or("");
                        if !first.is_empty() && first != "self" {
                            let mut s = segs.clone();
                            s.push(first.to_owned());
                            out.push((base, s));
                        }
                    }
                    if !segs.is_empty() {
                        out.push((base, segs));
                    }
                }
                break;
            }
        }
    }
    out
}

fn edges() -> BTreeMap<String, BTreeSet<String>> {
    let mods = modules();
    let mut graph = BTreeMap::new();
    for (name, text) in &mods {
        let here: Vec<&str> = if name.is_empty() {
            Vec::new()
        } else {
            name.split('/').collect()
        };
        let mut targets = BTreeSet::new();
        for (base, segs) in paths(text) {
            let mut full: Vec<String> = match base {
                None => Vec::new(),
                Some(n) => {
                    let mut b: Vec<String> = here.iter().map(|s| (*s).to_owned()).collect();
                    b.truncate(b.len().saturating_sub(n));
                    b
                }
            };
            full.extend(segs);
            let target = (0..=full.len())
                .rev()
                .map(|i| full[..i].join("/"))
                .find(|c| mods.contains_key(c))
                .unwrap_or_default();
            let below = name.is_empty() || target.starts_with(&format!("{name}/"));
            if target != *name && !below {
                targets.insert(target);
            }
        }
        graph.insert(name.clone(), targets);
    }
    graph
}

fn cycles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    fn visit(
        u: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        stack: &mut Vec<String>,
        found: &mut Vec<Vec<String>>,
    ) {
        state.insert(u.to_owned(), 1);
        stack.push(u.to_owned());
        for v in graph.get(u).into_iter().flatten() {
            match state.get(v) {
                None => visit(v, graph, state, stack, found),
                Some(1) => {
                    let at = stack.iter().position(|s| s == v).unwrap();
                    let mut c = stack[at..].to_vec();
                    c.sort();
                    found.push(c);
                }
                _ => {}
            }
        }
        stack.pop();
        state.insert(u.to_owned(), 2);
    }
    let (mut state, mut stack, mut found) = (BTreeMap::new(), Vec::new(), Vec::new());
    for u in graph.keys() {
        if !state.contains_key(u) {
            visit(u, graph, &mut state, &mut stack, &mut found);
        }
    }
    found
}

#[test]
fn the_core_never_imports_the_shell() {
    let graph = edges();
    assert!(graph.contains_key("chrome/ports") && graph.contains_key("tools/write"));
    let offenders: Vec<_> = graph
        .iter()
        .filter(|(m, _)| !m.is_empty() && !m.starts_with("chrome"))
        .filter(|(_, t)| t.iter().any(|t| t == "chrome" || t.starts_with("chrome/")))
        .map(|(m, _)| m.clone())
        .collect();
    assert!(
        offenders.is_empty(),
        "core modules importing chrome: {offenders:?}"
    );
    // The check sees imports at all: the shell does import the core.
    assert!(
        graph["chrome/ports"].contains("session"),
        "{:?}",
        graph["chrome/ports"]
    );
}

#[test]
fn module_imports_have_no_cycle() {
    let graph = edges();
    // The check sees the edges that matter: a sibling through super, a module through crate.
    assert!(
        graph["tools/status"].contains("tools/result"),
        "{:?}",
        graph["tools/status"]
    );
    assert!(
        graph["tools/write"].contains("provider"),
        "{:?}",
        graph["tools/write"]
    );
    let known: Vec<Vec<String>> = KNOWN_CYCLES
        .iter()
        .map(|c| c.iter().map(|s| (*s).to_owned()).collect())
        .collect();
    let new: Vec<_> = cycles(&graph)
        .into_iter()
        .filter(|c| !known.contains(c))
        .collect();
    assert!(new.is_empty(), "import cycles: {new:?}");
}

#[test]
fn a_cycle_is_found() {
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    g.insert("a".into(), ["b".to_owned()].into());
    g.insert("b".into(), ["a".to_owned()].into());
    g.insert("c".into(), ["a".to_owned()].into());
    assert_eq!(cycles(&g), vec![vec!["a".to_owned(), "b".to_owned()]]);
}
