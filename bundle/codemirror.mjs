// The options page's code editor: CodeMirror 6, bundled by scripts/build.sh (esbuild) into
// dist/codemirror.js. This file picks the pieces (no autocompletion and no bracket auto-closing:
// both change what the user types) and gives editor.js a small surface; editor.js decides nothing
// about CodeMirror and CodeMirror decides nothing about scripts.
import { EditorState, Compartment } from '@codemirror/state';
import {
  EditorView, keymap, lineNumbers, highlightActiveLine, highlightActiveLineGutter,
  highlightSpecialChars, drawSelection, dropCursor, rectangularSelection, ViewPlugin,
} from '@codemirror/view';
import { defaultKeymap, history, historyKeymap, indentWithTab } from '@codemirror/commands';
import { searchKeymap, highlightSelectionMatches, getSearchQuery, searchPanelOpen } from '@codemirror/search';
import {
  indentOnInput, syntaxHighlighting, defaultHighlightStyle, bracketMatching, foldGutter, foldKeymap,
} from '@codemirror/language';
import { lintGutter, lintKeymap, setDiagnostics } from '@codemirror/lint';
import { javascript } from '@codemirror/lang-javascript';
import { oneDarkHighlightStyle } from '@codemirror/theme-one-dark';

// Colours come from ui.css's variables, so light and dark follow the page; only the syntax
// colours switch with the scheme.
const pageTheme = EditorView.theme({
  '&': { color: 'var(--fg)', backgroundColor: 'var(--bg)', border: '1px solid var(--line)', borderRadius: '6px', height: '24rem' },
  '.cm-scroller': { fontFamily: 'ui-monospace, SFMono-Regular, Menlo, Consolas, monospace', fontSize: '13px', lineHeight: '1.45' },
  '.cm-gutters': { backgroundColor: 'var(--card)', color: 'var(--muted)', borderRight: '1px solid var(--line)' },
  '.cm-activeLine, .cm-activeLineGutter': { backgroundColor: 'color-mix(in srgb, var(--accent) 8%, transparent)' },
  '&.cm-focused': { outline: '2px solid var(--accent)', outlineOffset: '1px' },
  '&.cm-focused .cm-cursor': { borderLeftColor: 'var(--fg)' },
  '&.cm-focused > .cm-scroller > .cm-selectionLayer .cm-selectionBackground, .cm-selectionBackground':
    { backgroundColor: 'color-mix(in srgb, var(--accent) 30%, transparent)' },
  '.cm-panels': { backgroundColor: 'var(--card)', color: 'var(--fg)' },
  '.cm-panels.cm-panels-top': { borderBottom: '1px solid var(--line)' },
  '.cm-textfield, .cm-button': { color: 'var(--fg)', backgroundColor: 'var(--bg)', backgroundImage: 'none', border: '1px solid var(--line)' },
  '.cm-searchMatch': { backgroundColor: 'color-mix(in srgb, var(--warn-line) 35%, transparent)' },
  '.cm-searchMatch.cm-searchMatch-selected': { backgroundColor: 'color-mix(in srgb, var(--accent) 45%, transparent)' },
  '.cm-search-count': { margin: '0 0.5em', color: 'var(--muted)', fontVariantNumeric: 'tabular-nums', whiteSpace: 'nowrap' },
  '.cm-tooltip': { backgroundColor: 'var(--card)', color: 'var(--fg)', border: '1px solid var(--line)' },
});

/** Matches counted at most: a one-letter query in a 256 KiB script stays cheap per keystroke. */
const MAX_COUNTED = 1000;

/** "n of m" for the search panel: how many matches the query has and which one is selected
 *  (CodeMirror's own panel shows neither). Counted with the panel's own query and cursor, so it
 *  agrees with what is highlighted; put in the panel (`.cm-search`) as a polite live region. */
const matchCount = ViewPlugin.fromClass(class {
  constructor(view) { this.key = ''; this.update({ view }); }
  // After the update's DOM is written: the panel that opens in this update is in the page then.
  update({ view }) { view.requestMeasure({ key: this, read: () => null, write: () => this.render(view) }); }
  render(view) {
    const { state } = view;
    const panel = searchPanelOpen(state) && view.dom.querySelector('.cm-search');
    if (!panel) { this.key = ''; return; }
    const query = getSearchQuery(state);
    const sel = state.selection.main;
    const key = JSON.stringify([query.search, query.caseSensitive, query.regexp, query.wholeWord, sel.from, sel.to]);
    let out = panel.querySelector('.cm-search-count');
    if (out && key === this.key && state.doc === this.doc) return;
    this.key = key;
    this.doc = state.doc;
    if (!out) {
      out = Object.assign(document.createElement('span'), { className: 'cm-search-count' });
      out.setAttribute('role', 'status');
      out.setAttribute('aria-live', 'polite');
      panel.querySelector('input[name=search]')?.after(out);
    }
    out.textContent = describe(query, state, sel);
  }
});

function describe(query, state, sel) {
  if (!query.search) return '';
  if (!query.valid) return 'invalid pattern';
  let total = 0;
  let current = 0;
  const cursor = query.getCursor(state);
  for (let m = cursor.next(); !m.done; m = cursor.next()) {
    total += 1;
    if (m.value.from === sel.from && m.value.to === sel.to) current = total;
    if (total >= MAX_COUNTED) break;
  }
  const of = total >= MAX_COUNTED ? `${MAX_COUNTED}+` : `${total}`;
  if (!total) return 'no matches';
  return current ? `${current} of ${of}` : `${of} ${total === 1 ? 'match' : 'matches'}`;
}

const dark = window.matchMedia('(prefers-color-scheme: dark)');
const colours = () => syntaxHighlighting(dark.matches ? oneDarkHighlightStyle : defaultHighlightStyle, { fallback: true });

/**
 * Makes the editor in `parent`. `onChange()` runs after each edit, `onSave()` on Ctrl/Cmd+S.
 * Tab indents (Shift+Tab outdents); Escape then Tab leaves the editor (CodeMirror's tab-focus
 * mode), so keyboard users are never trapped.
 */
export function createEditor(parent, { onChange, onSave, label, describedBy }) {
  const highlight = new Compartment();
  const extensions = () => [
    lineNumbers(), highlightActiveLineGutter(), foldGutter(), lintGutter(),
    highlightSpecialChars(), history(), drawSelection(), dropCursor(),
    EditorState.allowMultipleSelections.of(true), indentOnInput(), bracketMatching(),
    rectangularSelection(), highlightActiveLine(), highlightSelectionMatches(), matchCount,
    highlight.of(colours()), javascript(), pageTheme,
    EditorView.contentAttributes.of({ 'aria-label': label, 'aria-describedby': describedBy }),
    keymap.of([
      { key: 'Mod-s', preventDefault: true, run: () => { onSave(); return true; } },
      ...defaultKeymap, ...searchKeymap, ...historyKeymap, ...foldKeymap, ...lintKeymap, indentWithTab,
    ]),
    EditorView.updateListener.of((u) => { if (u.docChanged) onChange(); }),
  ];
  const view = new EditorView({ parent, state: EditorState.create({ extensions: extensions() }) });
  dark.addEventListener('change', () => view.dispatch({ effects: highlight.reconfigure(colours()) }));
  return {
    view,
    get text() { return view.state.doc.toString(); },
    /** Replaces the whole text (a new document: no undo back into the previous script). */
    set text(s) { view.setState(EditorState.create({ doc: s, extensions: extensions() })); },
    focus() { view.focus(); },
    /** Shows {line, severity, message} problems at their lines (gutter marker and underline). */
    setProblems(list) {
      const doc = view.state.doc;
      const diagnostics = list.map((d) => {
        const line = doc.line(Math.min(Math.max(1, d.line | 0), doc.lines));
        return { from: line.from, to: line.to, severity: d.severity === 'error' ? 'error' : 'warning', message: d.message };
      });
      view.dispatch(setDiagnostics(view.state, diagnostics));
    },
    /** Selects line `n` and scrolls it into view. */
    goToLine(n) {
      const doc = view.state.doc;
      const line = doc.line(Math.min(Math.max(1, n | 0), doc.lines));
      view.dispatch({ selection: { anchor: line.from, head: line.to }, scrollIntoView: true });
      view.focus();
    },
  };
}
