//! One change: each changed field side by side, the evidence in place, the review form.

use super::*;

pub(super) fn leaf_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.to_string(),
        other => other.to_json(),
    }
}

/// The leaves under `v` at `pointer`: strings and other scalars, and empty
/// objects and arrays.
pub(super) fn leaves(v: &Value, pointer: String, out: &mut Vec<(String, String)>) {
    match v {
        Value::Object(o) if !o.is_empty() => {
            for (k, item) in o {
                let mut p = pointer.clone();
                plumbline_taxonomy::pointer::push_token(&mut p, k);
                leaves(item, p, out);
            }
        }
        Value::Array(items) if !items.is_empty() => {
            for (i, item) in items.iter().enumerate() {
                leaves(item, format!("{pointer}/{i}"), out);
            }
        }
        other => out.push((pointer, leaf_text(other))),
    }
}

/// The value at an RFC 6901 pointer.
pub(super) fn resolve<'a>(v: &'a Value, pointer: &str) -> Option<&'a Value> {
    if pointer.is_empty() {
        return Some(v);
    }
    let mut at = v;
    for token in pointer.strip_prefix('/')?.split('/') {
        let token = token.replace("~1", "/").replace("~0", "~");
        at = match at {
            Value::Object(o) => o.get(&token)?,
            Value::Array(items) => items.get(token.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    Some(at)
}

/// The text an evidence item points at within its field, if it is a
/// piece of text (a code point, a phrase, a URL…); `None` for evidence
/// about the field as a whole (a new required input, an annotation…).
pub(super) fn evidence_text(e: &Evidence) -> Option<String> {
    match &e.detail {
        Detail::InvisibleCodePoint { code_point, .. } => Some(code_point.to_string()),
        Detail::CommentMarker { text }
        | Detail::Phrase { text, .. }
        | Detail::ServerToolReference { text }
        | Detail::Pattern { text, .. } => Some(text.clone()),
        _ => None,
    }
}

pub(super) fn under(pointer: &str, root: &str) -> bool {
    pointer == root
        || pointer
            .strip_prefix(root)
            .is_some_and(|rest| rest.starts_with('/'))
}

/// The changed fields of a tool, old against new (either may be absent:
/// an added or a removed tool), with each evidence item placed on its
/// field: text evidence highlighted where it stands in the new text,
/// other evidence on the field (or the fields under it).
pub fn field_rows(
    old: Option<&Value>,
    new: Option<&Value>,
    evidence: &[Evidence],
) -> Vec<FieldRow> {
    let empty = Value::Object(Object::new());
    let (o, n) = (old.unwrap_or(&empty), new.unwrap_or(&empty));
    let mut rows: Vec<FieldRow> = Vec::new();
    let row = |pointer: String, old: Option<String>, new: Option<String>| FieldRow {
        pointer,
        old,
        new,
        rules: Vec::new(),
        highlights: Vec::new(),
    };
    for c in structural_diff(o, n) {
        let pointer = c.pointer();
        match (c.kind, c.old, c.new) {
            (ChangeKind::Modified, Some(a), Some(b)) => {
                rows.push(row(pointer, Some(leaf_text(a)), Some(leaf_text(b))));
            }
            (ChangeKind::Added, _, Some(b)) => {
                let mut found = Vec::new();
                leaves(b, pointer, &mut found);
                rows.extend(found.into_iter().map(|(p, t)| row(p, None, Some(t))));
            }
            (ChangeKind::Removed, Some(a), _) => {
                let mut found = Vec::new();
                leaves(a, pointer, &mut found);
                rows.extend(found.into_iter().map(|(p, t)| row(p, Some(t), None)));
            }
            _ => {}
        }
    }
    for e in evidence {
        if let Some(needle) = evidence_text(e).filter(|t| !t.is_empty()) {
            let target = rows.iter_mut().find(|r| {
                r.pointer == e.pointer && r.new.as_deref().is_some_and(|t| t.contains(&needle))
            });
            if let Some(r) = target {
                let text = r.new.as_deref().unwrap_or("");
                // A hostile description can repeat a needle without end;
                // the rule is named on the field either way.
                let room = MAX_HIGHLIGHTS.saturating_sub(r.highlights.len());
                let found: Vec<Range<usize>> = text
                    .match_indices(needle.as_str())
                    .take(room)
                    .map(|(at, m)| at..at + m.len())
                    .collect();
                r.highlights
                    .extend(found.into_iter().map(|range| (range, e.rule)));
                continue;
            }
        }
        let mut placed = false;
        for r in rows.iter_mut().filter(|r| under(&r.pointer, &e.pointer)) {
            if !r.rules.contains(&e.rule) {
                r.rules.push(e.rule);
            }
            placed = true;
        }
        if !placed {
            let mut r = row(
                e.pointer.clone(),
                resolve(o, &e.pointer).map(leaf_text),
                resolve(n, &e.pointer).map(leaf_text),
            );
            r.rules.push(e.rule);
            rows.push(r);
        }
    }
    for r in &mut rows {
        r.rules.sort_unstable();
    }
    rows
}

/// Where to download the raw definitions of a change's two sides.
pub(super) struct RawLinks {
    pub old: Option<String>,
    pub new: Option<String>,
}

pub(super) fn field_row(r: &FieldRow, raw: &RawLinks) -> Markup {
    let long = r.old.as_deref().map_or(0, str::len) + r.new.as_deref().map_or(0, str::len);
    let (old, new) = if long > 2 * MAX_SHOWN {
        long_sides(r, raw)
    } else {
        diffed_sides(r)
    };
    // Every rule with evidence on this field, whether it marks the field
    // or a piece of its text.
    let mut rules: Vec<RuleId> = r
        .rules
        .iter()
        .copied()
        .chain(r.highlights.iter().map(|(_, rule)| *rule))
        .collect();
    rules.sort_unstable();
    rules.dedup();
    html! {
        tr class=[(!rules.is_empty()).then_some("evidence")] {
            td.pointer {
                code { (pointer_markup(&r.pointer)) }
                @for rule in &rules { " " (rule_link(*rule)) }
            }
            td.old { (old) }
            td.new { (new) }
        }
    }
}

/// Both sides word-diffed, the new one with its evidence highlighted.
fn diffed_sides(r: &FieldRow) -> (Markup, Markup) {
    let edits = worddiff::diff(
        r.old.as_deref().unwrap_or(""),
        r.new.as_deref().unwrap_or(""),
    );
    let old = html! {
        @match &r.old {
            Some(t) => div.text { (text::fragments(t, &text::old_fragments(&edits))) },
            None => span.muted { "absent" },
        }
    };
    let new = html! {
        @match &r.new {
            Some(t) => div.text { (text::fragments(t, &text::new_fragments(&edits, &r.highlights))) },
            None => span.muted { "absent" },
        }
    };
    (old, new)
}

/// A field too long to diff on a page: the start of each side and links to
/// the raw definitions.
fn long_sides(r: &FieldRow, raw: &RawLinks) -> (Markup, Markup) {
    let side = |text: &Option<String>, link: &Option<String>| -> Markup {
        html! {
            @match text {
                Some(t) => {
                    div.text { (text::block(clip(t, MAX_SHOWN / 2))) }
                    p.truncated {
                        "Too long to compare on a page (" (t.len()) " bytes); the start is shown. "
                        @if let Some(l) = link { a href=(l) download { "Download the raw definition" } "." }
                    }
                }
                None => span.muted { "absent" },
            }
        }
    };
    (side(&r.old, &raw.old), side(&r.new, &raw.new))
}

pub(super) async fn change(
    State(state): State<AppState>,
    Path((name, id, ToolName(tool))): Path<(String, String, ToolName)>,
    headers: axum::http::HeaderMap,
) -> Result<Html<String>, PageError> {
    crate::not_cross_site(&headers)?;
    let server = name.clone();
    // Only reading holds the store; grading the one change, diffing and
    // highlighting (CPU work on a megabyte tool) run after, on a blocking
    // thread of their own, so other requests are not kept waiting.
    let (inputs, review) = state
        .with_store(move |store, inner| {
            views::change_inputs_view(&*store, inner, &name, &id, &tool)
        })
        .await?;
    let html = state
        .clone()
        .costly(move || {
            let detail = inputs.grade(&state.inner.grader);
            change_page(&server, &detail, review.as_ref(), &state)
        })
        .await?;
    Ok(html)
}

/// The bytes a server sent for a tool in an observation (the first copy
/// when the name is listed more than once), as a download.
pub(super) async fn raw(
    State(state): State<AppState>,
    Path((name, id, ToolName(tool))): Path<(String, String, ToolName)>,
    headers: axum::http::HeaderMap,
) -> Result<Response, PageError> {
    crate::not_cross_site(&headers)?;
    let (bytes, file) = state
        .with_store(move |store, _| {
            changes::server(store.store(), &name)?;
            let id = views::observation_id(&id)?;
            let observation = changes::observation_of(store.store(), &name, id)?;
            let bytes = changes::tool_bytes(store.store(), &observation, &tool)?
                .into_iter()
                .next()
                .ok_or_else(|| {
                    Failure::NotFound(format!("observation {id} lists no tool {tool:?}"))
                })?;
            let file: String = format!("{name}-{id}-{tool}")
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                        c
                    } else {
                        '_'
                    }
                })
                .collect();
            Ok((bytes, file))
        })
        .await?;
    Ok((
        [
            (header::CONTENT_TYPE, "application/json".to_owned()),
            (
                header::CONTENT_DISPOSITION,
                format!("attachment; filename=\"{file}.json\""),
            ),
        ],
        bytes,
    )
        .into_response())
}

pub(super) fn change_page(
    server: &str,
    d: &ChangeDetail,
    review: Option<&Review>,
    state: &AppState,
) -> Html<String> {
    let id = d.observation.summary.id;
    let t = &d.drift;
    let c = &t.classification;
    let rows = field_rows(
        d.old.as_ref().map(|x| &x.definition),
        d.new.as_ref().map(|x| &x.definition),
        &c.evidence,
    );
    let old_name = match &t.change {
        Change::Renamed { from } => from.as_str(),
        _ => t.name.as_str(),
    };
    let raw = RawLinks {
        old: d
            .old
            .as_ref()
            .map(|_| links::raw(server, d.previous.id, old_name)),
        new: d.new.as_ref().map(|_| links::raw(server, id, &t.name)),
    };
    layout(
        Some(state.taxonomy()),
        &format!("{} at observation {id} of {server}", t.name),
        html! {
            p.crumbs {
                a href="/" { "Servers" } " / "
                a href=(links::server(server)) { (line(server)) } " / "
                a href=(links::observation(server, id)) { "#" (id) } " / "
                (line(&t.name))
            }
            h1 {
                (severity_badge(t.severity)) " "
                a href=(links::tool(server, &t.name)) { (line(&t.name)) } " "
                (kind_label(&t.change))
            }
            p {
                "Observation "
                a href=(links::observation(server, id)) { "#" (id) }
                " (" (links::when(d.observation.summary.finished_at_ms)) ") against "
                a href=(links::observation(server, d.previous.id)) { "#" (d.previous.id) }
                " (" (links::when(d.previous.finished_at_ms)) "). "
                (review_label(review))
            }
            section {
                h2 { "Rules" }
                @if c.rules.is_empty() {
                    p.muted {
                        @if matches!(t.change, Change::Removed) { "A removal is reported, not graded." } @else { "No rule fired." }
                    }
                } @else {
                    ul.rules {
                        @for r in &c.rules {
                            li { (rule_link(*r)) " " (severity_badge(r.severity())) " " (r.title()) " — " a href=(links::rule(*r)) { "why this matters" } }
                        }
                    }
                    h3 { "Evidence" }
                    ol.evidence {
                        @for e in c.evidence.iter().take(MAX_EVIDENCE_SHOWN) {
                            li {
                                (rule_link(e.rule)) " "
                                code { (pointer_markup(&e.pointer)) } ": "
                                (line(&e.message()))
                            }
                        }
                    }
                    @if c.evidence.len() > MAX_EVIDENCE_SHOWN {
                        p.truncated { "… and " (c.evidence.len() - MAX_EVIDENCE_SHOWN) " more pieces of evidence (all of them in the JSON API)." }
                    }
                }
            }
            section {
                h2 { "What changed" }
                @if rows.is_empty() {
                    p.muted { "No field differs." }
                } @else {
                    table.fields {
                        thead { tr { th { "Field" } th { "Before" } th { "After" } } }
                        tbody { @for r in &rows { (field_row(r, &raw)) } }
                    }
                }
            }
            section {
                h2 { "Definitions" }
                div.side-by-side {
                    div {
                        h3 { "Before" @if let Some(o) = &d.old { " " code { (short(&o.canonical_digest)) } } }
                        @match &d.old {
                            Some(o) => (bounded_block(&pretty(&o.definition), raw.old.as_deref())),
                            None => p.muted { "Absent: the tool was added." },
                        }
                    }
                    div {
                        h3 { "After" @if let Some(n) = &d.new { " " code { (short(&n.canonical_digest)) } } }
                        @match &d.new {
                            Some(n) => (bounded_block(&pretty(&n.definition), raw.new.as_deref())),
                            None => p.muted { "Absent: the tool was removed." },
                        }
                    }
                }
            }
            @if let Some(copies) = &d.copies {
                section.duplicates {
                    h2 { "Every tool named " (line(&t.name)) }
                    p.warning {
                        "This listing carries " (copies.len()) " tools named " code { (line(&t.name)) }
                        " (the previous one may too). Clients differ on which one the model sees, so each is shown; "
                        "the diff above compares the copies paired in listing order. "
                        "No single version can be accepted into the baseline."
                    }
                    @for (i, copy) in copies.iter().enumerate() {
                        h3 { "Copy " (i + 1) " " code { (short(&copy.canonical_digest)) } }
                        (bounded_block(&pretty(&copy.definition), None))
                    }
                }
            }
            section.review-form {
                h2 { "Review" }
                @match review {
                    Some(r) => p {
                        "Marked " strong { (r.status.as_str()) } " by " (line(&r.reviewer))
                        " at " (links::when(r.at_ms)) "."
                        @if let Some(n) = &r.note { blockquote { (text::block(n)) } }
                    },
                    None => p { "Nobody has reviewed this change yet." },
                }
                form method="post" action=(links::review(server, id, &t.name)) {
                    input type="hidden" name="csrf" value=(state.form_token());
                    label { "Reviewer " input type="text" name="reviewer" value=(state.inner.reviewer) maxlength=(views::MAX_REVIEWER_CHARS) required; }
                    label { "Note " input type="text" name="note" maxlength=(views::MAX_NOTE_CHARS); }
                    button type="submit" name="status" value="reviewed" { "Mark reviewed" }
                    @if d.copies.is_none() {
                        button.accept type="submit" name="status" value="accepted" { "Accept into the baseline" }
                    }
                }
                p.muted {
                    "Accepting makes this version of the tool the server's baseline"
                    @if let Change::Renamed { from } = &t.change { " (and drops " (line(from)) ")" }
                    @if matches!(t.change, Change::Removed) { " (the tool leaves it)" }
                    "; either way the change no longer counts as unreviewed."
                }
            }
        },
    )
}

pub(super) async fn review(
    State(state): State<AppState>,
    Path((name, id, ToolName(tool))): Path<(String, String, ToolName)>,
    headers: HeaderMap,
    Form(form): Form<ReviewForm>,
) -> Result<Redirect, PageError> {
    crate::auth::check_form(&state, &headers, &form.csrf)?;
    let status = views::parse_status(&form.status)?;
    let verdict = Verdict {
        status,
        reviewer: form.reviewer,
        note: form.note,
    };
    let (review, _) =
        views::record_verdict(&state, name.clone(), id, tool.clone(), verdict).await?;
    Ok(Redirect::to(&links::change(
        &name,
        review.observation,
        &tool,
    )))
}
