//! A distributed job's timeline drawn as SVG on the server: ranks as rows, time across, the first
//! fault marked, cascades greyed. A pure function of the [`BundleDiagnosis`]; every text in it is
//! escaped and it holds no script, so the page can embed it as it is.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use crate::model::{BundleDiagnosis, FirstFault, RankOutcome, TimelineEvent, TimelineKind};

/// Width of the drawing.
const WIDTH: u32 = 960;
/// Width of the row labels.
const LABEL: u32 = 170;
/// Width of the band for events whose time is not known, at the right.
const UNTIMED: u32 = 90;
/// Height of a row.
const ROW: u32 = 18;
/// Height above the rows (the time axis).
const TOP: u32 = 34;
/// Rows drawn at most; the others are counted under the drawing.
pub const MAX_ROWS: usize = 48;
/// Longest text in a mark's tooltip.
const MAX_TEXT: usize = 240;

/// A row of the timeline: a rank, or a host (or file) for events no rank is known for.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Row {
    Rank(u32),
    Other(String),
}

impl Row {
    fn of(event: &TimelineEvent) -> Self {
        match (event.rank, &event.host) {
            (Some(rank), _) => Self::Rank(rank),
            (None, Some(host)) => Self::Other(host.clone()),
            (None, None) => Self::Other(event.file.clone()),
        }
    }
}

/// How much a row matters when not all of them can be drawn (lower first).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Weight {
    FirstFault,
    OwnEvent,
    Quiet,
    CascadeOnly,
}

/// The timeline of a bundle as an SVG document; `None` when it has neither ranks nor events.
pub fn timeline_svg(bundle: &BundleDiagnosis) -> Option<String> {
    let events = &bundle.timeline;
    let first = bundle
        .first_fault
        .as_ref()
        .and_then(|f| first_fault_event(events, f));
    let first_row = match (first, &bundle.first_fault) {
        (Some(i), _) => Some(Row::of(&events[i])),
        (None, Some(f)) => f.rank.map(Row::Rank),
        (None, None) => None,
    };

    let mut weights: BTreeMap<Row, Weight> = BTreeMap::new();
    for rank in &bundle.ranks {
        let quiet = matches!(rank.outcome, RankOutcome::NoLog | RankOutcome::NoFailure);
        weights.insert(
            Row::Rank(rank.rank),
            if quiet { Weight::Quiet } else { Weight::CascadeOnly },
        );
    }
    for event in events {
        let weight = if event.cascade {
            Weight::CascadeOnly
        } else {
            Weight::OwnEvent
        };
        let entry = weights.entry(Row::of(event)).or_insert(weight);
        *entry = (*entry).min(weight);
    }
    if let Some(row) = &first_row {
        weights.insert(row.clone(), Weight::FirstFault);
    }
    if weights.is_empty() {
        return None;
    }
    let mut by_weight: Vec<(&Row, &Weight)> = weights.iter().collect();
    by_weight.sort_by_key(|(row, weight)| (**weight, (*row).clone()));
    let drawn: BTreeSet<Row> = by_weight
        .iter()
        .take(MAX_ROWS)
        .map(|(r, _)| (*r).clone())
        .collect();
    let hidden = weights.len() - drawn.len();
    let index: BTreeMap<&Row, u32> = drawn.iter().zip(0u32..).collect();
    let hosts: BTreeMap<u32, &str> = bundle
        .ranks
        .iter()
        .filter_map(|r| r.host.as_deref().map(|h| (r.rank, h)))
        .collect();

    let times: Vec<i64> = events.iter().filter_map(|e| e.at_us).collect();
    let scale = Scale::new(times.iter().min().copied(), times.iter().max().copied());
    let rows = drawn.len() as u32;
    let height = TOP + rows * ROW + if hidden > 0 { ROW + 6 } else { 6 };

    let mut svg = String::with_capacity(4096 + events.len() * 160);
    let described = match &bundle.first_fault {
        Some(f) => format!("Timeline of the job: {}", f.summary),
        None => "Timeline of the job: no first fault elected".to_owned(),
    };
    let _ = write!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" class="timeline" viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" height="{height}" role="img" aria-labelledby="timeline-title"><title id="timeline-title">{}</title>"#,
        escape(&described)
    );
    // Stamps without a year were read in an assumed one: it is not shown.
    let year_known = !bundle.warnings.iter().any(|w| w.code == "no_year");
    scale.axis(&mut svg, height, year_known);

    for (row, &y) in &index {
        let top = TOP + y * ROW;
        let is_first = first_row.as_ref() == Some(*row);
        if is_first {
            let _ = write!(
                svg,
                r##"<rect class="first-fault-row" x="0" y="{top}" width="{WIDTH}" height="{ROW}" fill="#fde8e8"/>"##
            );
        } else if y % 2 == 1 {
            let _ = write!(
                svg,
                r##"<rect class="stripe" x="0" y="{top}" width="{WIDTH}" height="{ROW}" fill="#f6f7f9"/>"##
            );
        }
        let label = match row {
            Row::Rank(rank) => match hosts.get(rank) {
                Some(host) => format!("rank {rank} · {host}"),
                None => format!("rank {rank}"),
            },
            Row::Other(name) => name.clone(),
        };
        let _ = write!(
            svg,
            r##"<text class="row-label{}" x="6" y="{}" font-size="11" fill="#1f2937"{}>{}</text>"##,
            if is_first { " first" } else { "" },
            top + 13,
            if is_first { r#" font-weight="bold""# } else { "" },
            escape(&cut(&label, 28))
        );
    }

    // Untimed events of a row are spread across their band.
    let mut untimed_seen: BTreeMap<&Row, u32> = BTreeMap::new();
    let mut first_mark = None;
    for (i, event) in events.iter().enumerate() {
        let row = Row::of(event);
        let Some((row_key, &y)) = index.get_key_value(&row) else {
            continue;
        };
        let cy = TOP + y * ROW + ROW / 2;
        let x = match event.at_us {
            Some(at) => scale.x(at),
            None => {
                let n = untimed_seen.entry(row_key).or_insert(0);
                *n += 1;
                WIDTH - UNTIMED + 12 + (*n - 1).min(6) * 10
            }
        };
        if Some(i) == first {
            first_mark = Some((x, cy, event));
            continue;
        }
        let (class, fill, r) = if event.cascade {
            ("cascade".to_owned(), "#b8bcc4", 4)
        } else {
            let kind = kind_name(&event.kind);
            (format!("event {kind}"), kind_colour(&event.kind), 5)
        };
        let _ = write!(
            svg,
            r#"<circle class="mark {class}" cx="{x}" cy="{cy}" r="{r}" fill="{fill}"><title>{}</title></circle>"#,
            escape(&tooltip(event))
        );
    }
    // Drawn last, over the others.
    if let Some((x, cy, event)) = first_mark {
        let (x, cy) = (i64::from(x), i64::from(cy));
        let _ = write!(
            svg,
            r##"<g class="mark first-fault"><path d="M{x} {} L{} {cy} L{x} {} L{} {cy} Z" fill="#c81e1e" stroke="#7f1d1d"/><title>first fault: {}</title></g>"##,
            cy - 8,
            x + 8,
            cy + 8,
            x - 8,
            escape(&tooltip(event))
        );
        let label_x = if x > i64::from(WIDTH - UNTIMED - 80) {
            x - 76
        } else {
            x + 11
        };
        let _ = write!(
            svg,
            r##"<text class="first-fault-label" x="{label_x}" y="{}" font-size="11" font-weight="bold" fill="#7f1d1d">first fault</text>"##,
            cy + 4
        );
    }
    if hidden > 0 {
        let _ = write!(
            svg,
            r##"<text class="hidden-rows" x="6" y="{}" font-size="11" fill="#6b7280">{hidden} more row(s) not drawn: ranks that only waited (cascades) or showed nothing</text>"##,
            TOP + rows * ROW + 14
        );
    }
    svg.push_str("</svg>");
    Some(svg)
}

/// The timeline event of the first fault: its rank's (or, without a rank, its host's) earliest
/// event that is not a cascade, at the fault's time when the event has it.
fn first_fault_event(events: &[TimelineEvent], fault: &FirstFault) -> Option<usize> {
    let place = |e: &TimelineEvent| {
        !e.cascade
            && match fault.rank {
                Some(rank) => e.rank == Some(rank),
                None => e.rank.is_none() && fault.host.is_some() && e.host == fault.host,
            }
    };
    events
        .iter()
        .position(|e| place(e) && fault.at_us.is_some() && e.at_us == fault.at_us)
        .or_else(|| events.iter().position(place))
}

/// Time across: the span of the timed events over the plot's width.
struct Scale {
    start: Option<i64>,
    span: i64,
}

impl Scale {
    fn new(start: Option<i64>, end: Option<i64>) -> Self {
        Self {
            start,
            span: match (start, end) {
                (Some(s), Some(e)) => (e - s).max(0),
                _ => 0,
            },
        }
    }

    fn plot_width() -> u32 {
        WIDTH - LABEL - UNTIMED - 20
    }

    fn x(&self, at_us: i64) -> u32 {
        let Some(start) = self.start else {
            return LABEL + 10;
        };
        if self.span == 0 {
            return LABEL + 10 + Self::plot_width() / 2;
        }
        let share = (at_us - start) as f64 / self.span as f64;
        LABEL + 10 + (share.clamp(0.0, 1.0) * f64::from(Self::plot_width())).round() as u32
    }

    fn axis(&self, svg: &mut String, height: u32, year_known: bool) {
        let bottom = height - 4;
        let _ = write!(
            svg,
            r##"<line class="axis" x1="{LABEL}" y1="{}" x2="{}" y2="{}" stroke="#9ca3af"/>"##,
            TOP - 4,
            WIDTH - UNTIMED,
            TOP - 4
        );
        let _ = write!(
            svg,
            r##"<line class="untimed" x1="{0}" y1="6" x2="{0}" y2="{bottom}" stroke="#d1d5db" stroke-dasharray="3 3"/><text x="{1}" y="14" font-size="10" fill="#6b7280">time unknown</text>"##,
            WIDTH - UNTIMED + 2,
            WIDTH - UNTIMED + 8
        );
        let Some(start) = self.start else {
            let _ = write!(
                svg,
                r##"<text class="axis-label" x="{}" y="14" font-size="10" fill="#6b7280">no event carries a time</text>"##,
                LABEL + 10
            );
            return;
        };
        let _ = write!(
            svg,
            r##"<text class="axis-start" x="6" y="14" font-size="10" fill="#374151">{}</text>"##,
            escape(&stamp(start, year_known))
        );
        let ticks: &[i64] = if self.span == 0 { &[0] } else { &[0, 1, 2, 3, 4] };
        for &tick in ticks {
            let at = start + self.span * tick / 4;
            let x = self.x(at);
            let _ = write!(
                svg,
                r##"<line class="tick" x1="{x}" y1="{}" x2="{x}" y2="{bottom}" stroke="#e5e7eb"/><text class="tick-label" x="{x}" y="{}" font-size="10" text-anchor="middle" fill="#6b7280">{}</text>"##,
                TOP - 8,
                TOP - 12,
                offset(at - start)
            );
        }
    }
}

/// `+0 s`, `+350 ms`, `+12.5 s`, `+2.5 min`, `+90 min` after the first timed event.
fn offset(us: i64) -> String {
    let ms = us / 1000;
    if ms == 0 {
        "+0 s".to_owned()
    } else if ms < 1000 {
        format!("+{ms} ms")
    } else if ms < 120_000 {
        format!("+{:.1} s", ms as f64 / 1000.0)
    } else if ms < 600_000 {
        format!("+{:.1} min", ms as f64 / 60_000.0)
    } else {
        format!("+{} min", ms / 60_000)
    }
}

/// `2025-03-04 10:00:01.250 UTC` from microseconds since the epoch (`03-04 10:00:01.250 UTC`
/// when the year is not known).
fn stamp(us: i64, year_known: bool) -> String {
    let ms = us.div_euclid(1000);
    let minute = super::views::when(ms);
    let seconds = ms.rem_euclid(60_000);
    // `when` gives `YYYY-MM-DD HH:MM UTC`: add the seconds.
    let full = match minute.strip_suffix(" UTC") {
        Some(head) => format!("{head}:{:02}.{:03} UTC", seconds / 1000, seconds % 1000),
        None => minute,
    };
    match full.split_once('-') {
        Some((_, rest)) if !year_known => rest.to_owned(),
        _ => full,
    }
}

fn tooltip(event: &TimelineEvent) -> String {
    let mut parts = Vec::new();
    if let Some(rank) = event.rank {
        parts.push(format!("rank {rank}"));
    }
    if let Some(host) = &event.host {
        parts.push(host.clone());
    }
    if let Some(s) = &event.stamp {
        parts.push(s.clone());
    }
    parts.push(format!("{}:{}", event.file, event.line));
    if event.cascade {
        parts.push("cascade".to_owned());
    }
    format!("{} — {}", parts.join(" · "), cut(&event.text, MAX_TEXT))
}

fn kind_name(kind: &TimelineKind) -> &'static str {
    match kind {
        TimelineKind::Fault { .. } => "fault",
        TimelineKind::Xid { .. } => "xid",
        TimelineKind::CollectiveTimeout { .. } => "timeout",
        TimelineKind::PeerLost { .. } => "peer-lost",
        TimelineKind::Exit { .. } => "exit",
        TimelineKind::HealthCheck { .. } => "health",
    }
}

fn kind_colour(kind: &TimelineKind) -> &'static str {
    match kind {
        TimelineKind::Fault { .. } => "#c2410c",
        TimelineKind::Xid { .. } => "#7c3aed",
        TimelineKind::CollectiveTimeout { .. } => "#2563eb",
        TimelineKind::PeerLost { .. } => "#0891b2",
        TimelineKind::Exit { .. } => "#475569",
        TimelineKind::HealthCheck { .. } => "#be185d",
    }
}

/// At most `max` characters, with `…` when cut.
fn cut(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

/// Text made safe inside SVG (XML) text and attribute values.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            // Control characters are not allowed in XML 1.0.
            c if c.is_control() && c != '\t' => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Confidence, Coverage, FaultKind, RankReport};

    fn event(
        rank: Option<u32>,
        at_s: Option<i64>,
        kind: TimelineKind,
        cascade: bool,
        text: &str,
    ) -> TimelineEvent {
        TimelineEvent {
            at_us: at_s.map(|s| 1_741_082_400_000_000 + s * 1_000_000),
            stamp: None,
            rank,
            host: rank.map(|r| format!("node-{}", r / 4)),
            file: format!("rank{}.log", rank.unwrap_or(99)),
            line: 7,
            kind,
            text: text.to_owned(),
            cascade,
        }
    }

    fn timeout() -> TimelineKind {
        TimelineKind::CollectiveTimeout { collective: None }
    }

    fn fault() -> TimelineKind {
        TimelineKind::Fault {
            class: "cuda.device_assert.index".into(),
        }
    }

    fn bundle(ranks: u32, timeline: Vec<TimelineEvent>, first_rank: Option<u32>) -> BundleDiagnosis {
        BundleDiagnosis {
            format_version: crate::model::BUNDLE_FORMAT_VERSION,
            first_fault: first_rank.map(|rank| FirstFault {
                kind: FaultKind::RankFailure,
                summary: format!("rank {rank} failed first"),
                rank: Some(rank),
                host: None,
                local_rank: None,
                gpu: None,
                collective: None,
                cause: None,
                xid: None,
                at_us: timeline
                    .iter()
                    .find(|e| e.rank == Some(rank) && !e.cascade)
                    .and_then(|e| e.at_us),
                confidence: Confidence::High,
                reasons: Vec::new(),
                evidence: Vec::new(),
            }),
            cascades: Vec::new(),
            missing: Vec::new(),
            collectives: Vec::new(),
            xids: Vec::new(),
            coverage: Coverage::default(),
            ranks: (0..ranks)
                .map(|rank| RankReport {
                    rank,
                    host: Some(format!("node-{}", rank / 4)),
                    local_rank: None,
                    gpu: None,
                    files: Vec::new(),
                    outcome: if Some(rank) == first_rank {
                        RankOutcome::Fault
                    } else {
                        RankOutcome::Cascade
                    },
                    root: None,
                    first_failure: None,
                })
                .collect(),
            hosts: Vec::new(),
            clock_offsets: Vec::new(),
            timeline,
            files: Vec::new(),
            warnings: Vec::new(),
        }
    }

    fn eight_ranks_one_fault() -> BundleDiagnosis {
        let mut timeline = vec![event(
            Some(3),
            Some(0),
            fault(),
            false,
            "RuntimeError: CUDA error: device-side assert triggered",
        )];
        timeline.extend((0..8).filter(|r| *r != 3).map(|r| {
            event(
                Some(r),
                Some(600),
                timeout(),
                true,
                "Watchdog caught collective operation timeout",
            )
        }));
        bundle(8, timeline, Some(3))
    }

    fn count(svg: &str, needle: &str) -> usize {
        svg.matches(needle).count()
    }

    #[test]
    fn each_rank_is_a_row_and_the_first_fault_is_marked_once_on_its_row() {
        let svg = timeline_svg(&eight_ranks_one_fault()).unwrap_or_default();
        assert!(svg.starts_with("<svg ") && svg.ends_with("</svg>"));
        assert_eq!(count(&svg, r#"class="row-label"#), 8, "{svg}");
        assert_eq!(count(&svg, r#"class="mark first-fault""#), 1);
        assert_eq!(count(&svg, "first-fault-row"), 1);
        assert!(svg.contains(">rank 3 · node-0</text>"));
        assert!(svg.contains("<title>first fault: rank 3 · node-0 · rank3.log:7 — RuntimeError"));
    }

    #[test]
    fn cascades_are_grey_and_the_ranks_own_failures_are_coloured() {
        let svg = timeline_svg(&eight_ranks_one_fault()).unwrap_or_default();
        assert_eq!(count(&svg, r##"class="mark cascade" "##), 7);
        assert_eq!(count(&svg, r##"fill="#b8bcc4""##), 7);
        let mut other = eight_ranks_one_fault();
        other.timeline.push(event(
            Some(5),
            Some(10),
            TimelineKind::Xid { code: 79 },
            false,
            "NVRM: Xid 79",
        ));
        let svg = timeline_svg(&other).unwrap_or_default();
        assert_eq!(count(&svg, r#"class="mark event xid""#), 1);
    }

    #[test]
    fn time_runs_left_to_right_from_the_first_event() {
        let svg = timeline_svg(&eight_ranks_one_fault()).unwrap_or_default();
        assert!(svg.contains(">2025-03-04 10:00:00.000 UTC</text>"), "{svg}");
        assert!(
            svg.contains(">+0 s</text>") && svg.contains(">+10 min</text>"),
            "{svg}"
        );
        let fault_x = LABEL + 10;
        assert!(
            svg.contains(&format!("M{fault_x} ")),
            "the fault is at the left edge: {svg}"
        );
        let end_x = LABEL + 10 + Scale::plot_width();
        assert!(
            svg.contains(&format!(r#"cx="{end_x}""#)),
            "the timeouts at the right end: {svg}"
        );
    }

    #[test]
    fn a_year_the_stamps_did_not_show_is_not_drawn() {
        let mut b = eight_ranks_one_fault();
        b.warnings.push(crate::model::Warning::new(
            "no_year",
            "no stamp shows a year",
            None,
        ));
        let svg = timeline_svg(&b).unwrap_or_default();
        assert!(svg.contains(">03-04 10:00:00.000 UTC</text>"), "{svg}");
        assert_eq!(offset(150_000_000), "+2.5 min");
    }

    #[test]
    fn events_without_a_time_go_to_their_own_band() {
        let timeline = vec![
            event(Some(0), None, fault(), false, "IndexError: index out of range"),
            event(Some(1), None, timeout(), true, "timeout"),
        ];
        let svg = timeline_svg(&bundle(2, timeline, Some(0))).unwrap_or_default();
        assert!(svg.contains("no event carries a time"));
        let band = WIDTH - UNTIMED + 12;
        assert!(
            svg.contains(&format!(r#"cx="{band}""#)) && svg.contains(&format!("M{band} ")),
            "{svg}"
        );
    }

    #[test]
    fn text_from_the_logs_is_escaped_and_nothing_runs() {
        let mut b = eight_ranks_one_fault();
        b.timeline[0].text = "<script>alert(1)</script> \"quoted\" & 'single'".into();
        b.ranks[3].host = Some("<img src=x onerror=alert(2)>".into());
        let svg = timeline_svg(&b).unwrap_or_default();
        assert!(!svg.contains("<script") && !svg.contains("<img"), "{svg}");
        assert!(
            svg.contains("&lt;script&gt;alert(1)&lt;/script&gt; &quot;quoted&quot; &amp; &#39;single&#39;")
        );
        assert!(
            svg.contains(">rank 3 · &lt;img src=x"),
            "the label is cut, its text escaped"
        );
    }

    #[test]
    fn a_thousand_ranks_draw_the_first_fault_and_count_the_rest() {
        let mut timeline = vec![event(Some(700), Some(0), fault(), false, "boom")];
        timeline.extend(
            (0..1000)
                .filter(|r| *r != 700)
                .map(|r| event(Some(r), Some(600), timeout(), true, "timeout")),
        );
        let svg = timeline_svg(&bundle(1000, timeline, Some(700))).unwrap_or_default();
        assert_eq!(count(&svg, r#"class="row-label"#), MAX_ROWS);
        assert!(svg.contains(">rank 700 · node-175</text>"));
        assert!(svg.contains(&format!("{} more row(s) not drawn", 1000 - MAX_ROWS)));
        assert_eq!(count(&svg, r#"class="mark first-fault""#), 1);
    }

    #[test]
    fn a_rank_that_never_arrived_keeps_its_row_though_it_has_no_event() {
        let mut b = eight_ranks_one_fault();
        b.first_fault = None;
        b.timeline.retain(|e| e.rank != Some(3));
        b.ranks[3].outcome = RankOutcome::NoFailure;
        let svg = timeline_svg(&b).unwrap_or_default();
        assert!(svg.contains(">rank 3 · node-0</text>"));
        assert_eq!(count(&svg, "first-fault"), 0, "no first fault, no mark");
    }

    #[test]
    fn nothing_to_draw_is_no_drawing() {
        assert_eq!(timeline_svg(&bundle(0, Vec::new(), None)), None);
    }
}
