//! Charts drawn by the server as inline SVG: no JavaScript and no library, so they show in
//! any browser and cost nothing to load. Each chart is a pure function from a series to
//! markup; the geometry (value axis, positions, bar sizes) is kept apart so it can be tested.
//! The SVG has a `viewBox` and no fixed size, so CSS (`svg.chart`) scales it to its container.
//! Every mark carries `data-label`/`data-value` with its figure, and the chart is one image to
//! assistive technology (`role="img"`, `<title>`, `<desc>`); pages show the figures as a table too.

use maud::{Markup, html};

/// The drawing's width in its own units; CSS scales it to the container.
const WIDTH: f64 = 480.0;
/// The line chart: the value axis's name on a line of its own above the plot (never over
/// the figures, however narrow the screen), room for the value labels on the left (as wide
/// as the longest needs, [`line_left`]) and the dates below.
const LINE_HEIGHT: f64 = 284.0;
const LINE_TOP: f64 = 42.0;
const RIGHT: f64 = 14.0;
const TOP: f64 = 14.0;
const LINE_BOTTOM: f64 = 44.0;
/// The width of one character of chart text at its largest (19px on a phone, in the
/// drawing's units, which a phone's screen shrinks: this errs wide).
const CHAR_WIDTH: f64 = 11.5;
/// The bar chart runs across, one band per category: its name on top, then one bar per
/// series, so long names need no rotation and the chart grows downwards with the data.
const BAR_LEFT: f64 = 8.0;
/// Room on the right for the figure written after the longest bar.
const BAR_RIGHT: f64 = 76.0;
const BAND_LABEL: f64 = 26.0;
const BAR: f64 = 18.0;
const BAR_GAP: f64 = 4.0;
const BAND_GAP: f64 = 14.0;
const BAR_AXIS: f64 = 58.0;
/// Category names longer than this are cut with an ellipsis (the table has them whole).
const LABEL_CHARS: usize = 42;

/// What a chart says about itself: its `<title>`, `<desc>` and axis names.
pub struct ChartText<'a> {
    /// A unique prefix for the element ids on the page.
    pub id: &'a str,
    pub title: &'a str,
    pub description: String,
    /// The name of the category axis (days); the bar chart names each band instead.
    pub x_label: &'a str,
    /// The name of the value axis.
    pub y_label: &'a str,
    /// `%` for rates, "" for counts.
    pub unit: &'a str,
}

/// One category with one value per series (one bar each).
pub struct Group {
    pub label: String,
    /// Identifies the category in `data-key` (e.g. an issue id).
    pub key: String,
    pub values: Vec<f64>,
}

/// The "nice" tops of a value axis within one power of ten, each with the number of steps
/// its gridlines take (so every tick is a round figure too): an axis ends just above the
/// data (2,000 subscribers: 2,000; 2,100: 2,500), not at the next 1, 2 or 5.
const NICE: [(f64, usize); 10] = [
    (1.0, 5),
    (1.5, 3),
    (2.0, 4),
    (2.5, 5),
    (3.0, 3),
    (4.0, 4),
    (5.0, 5),
    (6.0, 3),
    (8.0, 4),
    (10.0, 5),
];

/// The top of the value axis and its number of steps: the smallest [`NICE`] figure times a
/// power of ten that is at least `max`, and at least `floor` (so a chart of small counts
/// does not get ticks at 0.2 subscribers). Never zero, so positions never divide by zero.
fn nice_axis(max: f64, floor: f64) -> (f64, usize) {
    let max = if max.is_finite() {
        max.max(floor)
    } else {
        floor
    };
    if max <= 0.0 {
        return (1.0, 5);
    }
    let magnitude = 10f64.powf(max.log10().floor());
    NICE.into_iter()
        .map(|(m, steps)| (m * magnitude, steps))
        .find(|(top, _)| *top >= max * (1.0 - 1e-9))
        .unwrap_or((10.0 * magnitude, 5))
}

/// The top of the value axis (see [`nice_axis`]).
fn axis_top(max: f64, floor: f64) -> f64 {
    nice_axis(max, floor).0
}

/// Gridline values from 0 to `top` (a top [`nice_axis`] chose), in its steps.
fn ticks(top: f64) -> Vec<f64> {
    let magnitude = 10f64.powf(top.log10().floor());
    let mantissa = top / magnitude;
    let steps = NICE
        .iter()
        .find(|(m, _)| (m - mantissa).abs() < 1e-9)
        .map_or(5, |(_, steps)| *steps);
    (0..=steps).map(|i| top * i as f64 / steps as f64).collect()
}

/// The plotting area inside the drawing.
#[derive(Debug, Clone, Copy)]
struct Plot {
    left: f64,
    top: f64,
    width: f64,
    height: f64,
}

impl Plot {
    /// The line chart's plot, `left` units from the edge.
    fn line(left: f64) -> Plot {
        Plot {
            left,
            top: LINE_TOP,
            width: WIDTH - left - RIGHT,
            height: LINE_HEIGHT - LINE_TOP - LINE_BOTTOM,
        }
    }

    /// The bands of `groups` categories with `per_group` bars each.
    fn bars(groups: usize, per_group: usize) -> Plot {
        Plot {
            left: BAR_LEFT,
            top: TOP,
            width: WIDTH - BAR_LEFT - BAR_RIGHT,
            height: band_height(per_group) * groups as f64,
        }
    }

    fn bottom(&self) -> f64 {
        self.top + self.height
    }

    /// Share of the axis from 0 to `axis_top` that `value` takes, clamped to 0..=1.
    fn share(value: f64, axis_top: f64) -> f64 {
        if axis_top > 0.0 && value.is_finite() {
            (value / axis_top).clamp(0.0, 1.0)
        } else {
            0.0
        }
    }

    /// Vertical position of `value` on an upward axis from 0 to `axis_top`.
    fn y(&self, value: f64, axis_top: f64) -> f64 {
        self.bottom() - Self::share(value, axis_top) * self.height
    }

    /// Horizontal position of `value` on a rightward axis from 0 to `axis_top`.
    fn along(&self, value: f64, axis_top: f64) -> f64 {
        self.left + Self::share(value, axis_top) * self.width
    }

    /// Horizontal position of point `i` of `n`, first at the left edge and last at the
    /// right; a single point sits in the middle.
    fn x(&self, i: usize, n: usize) -> f64 {
        if n <= 1 {
            self.left + self.width / 2.0
        } else {
            self.left + self.width * i as f64 / (n - 1) as f64
        }
    }

    /// Top of bar `series` in band `group`.
    fn bar_top(&self, group: usize, series: usize, per_group: usize) -> f64 {
        self.top
            + band_height(per_group) * group as f64
            + BAND_LABEL
            + (BAR + BAR_GAP) * series as f64
    }
}

/// The room left of the line chart's plot: the longest value label at its widest, and a gap.
fn line_left(ticks: &[f64], unit: &str) -> f64 {
    let longest = ticks
        .iter()
        .map(|t| tick_figure(*t, unit).chars().count())
        .max()
        .unwrap_or(1);
    12.0 + CHAR_WIDTH * longest as f64
}

/// One category's band: its name, its bars, and a gap.
fn band_height(per_group: usize) -> f64 {
    BAND_LABEL + (BAR + BAR_GAP) * per_group as f64 - BAR_GAP + BAND_GAP
}

/// A figure as the chart shows it: rates with one decimal and the unit, counts as integers.
pub fn figure(value: f64, unit: &str) -> String {
    if unit.is_empty() && value.fract() == 0.0 {
        format!("{value:.0}")
    } else {
        format!("{value:.1}{unit}")
    }
}

/// An axis label: whole numbers without decimals (`20%`, not `20.0%`).
fn tick_figure(value: f64, unit: &str) -> String {
    if value.fract() == 0.0 {
        format!("{value:.0}{unit}")
    } else {
        figure(value, unit)
    }
}

fn coordinate(value: f64) -> String {
    format!("{value:.1}")
}

fn short(label: &str) -> String {
    if label.chars().count() <= LABEL_CHARS {
        label.to_string()
    } else {
        let cut: String = label.chars().take(LABEL_CHARS - 1).collect();
        format!("{}…", cut.trim_end())
    }
}

/// The SVG element every chart shares, with its title and description; `height` in the
/// drawing's units. SVG elements are written with closing tags: HTML's parser does not
/// self-close them otherwise.
fn frame(text: &ChartText, kind: &str, height: f64, content: Markup) -> Markup {
    let (title_id, desc_id) = (format!("{}-title", text.id), format!("{}-desc", text.id));
    html! {
        svg.chart xmlns="http://www.w3.org/2000/svg" viewBox={ "0 0 " (WIDTH) " " (coordinate(height)) }
            role="img" aria-labelledby={ (title_id) " " (desc_id) } data-chart=(kind) id=(text.id) {
            title id=(title_id) { (text.title) }
            desc id=(desc_id) { (text.description) }
            (content)
        }
    }
}

/// A line with a shaded area over `points` (label, value), left to right, on an upward axis
/// from 0; the first, middle and last labels are written under it. The caller shows an
/// empty state instead of a chart with no points; given none, this draws the empty axes.
pub fn line_chart(text: &ChartText, points: &[(String, f64)]) -> Markup {
    let top = axis_top(points.iter().map(|p| p.1).fold(0.0, f64::max), 5.0);
    let plot = Plot::line(line_left(&ticks(top), text.unit));
    let xy: Vec<(f64, f64)> = points
        .iter()
        .enumerate()
        .map(|(i, (_, v))| (plot.x(i, points.len()), plot.y(*v, top)))
        .collect();
    let line: Vec<String> = xy
        .iter()
        .map(|(x, y)| format!("{},{}", coordinate(*x), coordinate(*y)))
        .collect();
    let labelled: Vec<usize> = match points.len() {
        0 => vec![],
        1 => vec![0],
        n => vec![0, (n - 1) / 2, n - 1],
    };
    let anchor = |i: usize| match i {
        0 if points.len() > 1 => "start",
        i if i + 1 == points.len() && points.len() > 1 => "end",
        _ => "middle",
    };
    frame(
        text,
        "line",
        LINE_HEIGHT,
        html! {
            g.grid {
                @for tick in ticks(top) {
                    @let y = coordinate(plot.y(tick, top));
                    line x1=(coordinate(plot.left)) x2=(coordinate(plot.left + plot.width)) y1=(y) y2=(y) {}
                    text.tick x=(coordinate(plot.left - 6.0)) y=(y) text-anchor="end" dominant-baseline="middle" { (tick_figure(tick, text.unit)) }
                }
            }
            text.axis-label x="0" y="16" { (text.y_label) }
            text.axis-label x=(coordinate(plot.left + plot.width / 2.0)) y=(coordinate(LINE_HEIGHT - 4.0)) text-anchor="middle" { (text.x_label) }
            @if let (Some(first), Some(last)) = (xy.first(), xy.last()) {
                path.area d={ "M" (coordinate(first.0)) "," (coordinate(plot.bottom())) " L" (line.join(" L")) " L" (coordinate(last.0)) "," (coordinate(plot.bottom())) " Z" } {}
                polyline.line points=(line.join(" ")) {}
            }
            g.points {
                @for ((label, value), (x, y)) in points.iter().zip(&xy) {
                    circle cx=(coordinate(*x)) cy=(coordinate(*y)) r="2" data-label=(label) data-value=(figure(*value, text.unit)) {
                        title { (label) ": " (figure(*value, text.unit)) }
                    }
                }
            }
            @for i in labelled {
                text.tick x=(coordinate(xy[i].0)) y=(coordinate(plot.bottom() + 18.0)) text-anchor=(anchor(i)) { (points[i].0) }
            }
        },
    )
}

/// Grouped bars across: a band per category with its name, then one bar per series (named
/// in `series`, drawn with classes `series-0`, `series-1`, …) and its figure; one value axis
/// from 0 (rates: up to 100) along the bottom.
pub fn grouped_bars(text: &ChartText, series: &[&str], groups: &[Group]) -> Markup {
    let plot = Plot::bars(groups.len(), series.len());
    let max = groups
        .iter()
        .flat_map(|g| g.values.iter().copied())
        .fold(0.0, f64::max);
    // Counts get whole ticks (an axis of at least 5); rates may end at 1%.
    let floor = if text.unit.is_empty() { 5.0 } else { 1.0 };
    let top = axis_top(max, floor);
    let height = plot.bottom() + BAR_AXIS;
    frame(
        text,
        "bars",
        height,
        html! {
            g.grid {
                @for tick in ticks(top) {
                    @let x = coordinate(plot.along(tick, top));
                    line x1=(x) x2=(x) y1=(coordinate(plot.top)) y2=(coordinate(plot.bottom())) {}
                    // The 0 at the very left edge starts there instead of being cut in half.
                    text.tick x=(x) y=(coordinate(plot.bottom() + 18.0)) text-anchor=(if tick == 0.0 { "start" } else { "middle" }) { (tick_figure(tick, text.unit)) }
                }
            }
            text.axis-label x=(coordinate(plot.left + plot.width / 2.0)) y=(coordinate(height - 6.0)) text-anchor="middle" { (text.y_label) }
            @for (i, group) in groups.iter().enumerate() {
                g.group data-key=(group.key) data-label=(group.label) {
                    text.band x=(coordinate(plot.left)) y=(coordinate(plot.bar_top(i, 0, series.len()) - 6.0)) { (short(&group.label)) }
                    @for (j, value) in group.values.iter().enumerate() {
                        @let y = plot.bar_top(i, j, series.len());
                        @let end = plot.along(*value, top);
                        @let name = series.get(j).copied().unwrap_or("");
                        rect class={ "series-" (j) } x=(coordinate(plot.left)) y=(coordinate(y)) width=(coordinate(end - plot.left))
                            height=(coordinate(BAR)) data-series=(name) data-value=(figure(*value, text.unit)) {
                            title { (group.label) ": " (name) " " (figure(*value, text.unit)) }
                        }
                        text.figure x=(coordinate(end + 4.0)) y=(coordinate(y + BAR / 2.0)) dominant-baseline="middle" { (figure(*value, text.unit)) }
                    }
                }
            }
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_axis_top_is_round_never_zero_and_never_below_the_data() {
        assert_eq!(axis_top(0.0, 0.0), 1.0);
        assert_eq!(axis_top(f64::NAN, 0.0), 1.0);
        assert_eq!(axis_top(3.0, 5.0), 5.0);
        assert_eq!(axis_top(50.0, 1.0), 50.0);
        assert_eq!(axis_top(100.0, 1.0), 100.0);
        assert_eq!(ticks(20.0), [0.0, 5.0, 10.0, 15.0, 20.0]);
        assert_eq!(ticks(100.0), [0.0, 20.0, 40.0, 60.0, 80.0, 100.0]);
        assert_eq!(ticks(5.0), [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
    }

    #[test]
    fn the_axis_ends_just_above_the_data_at_a_nice_figure() {
        // 2,000 subscribers: an axis to 2,000, not 5,000; a little more: 2,500.
        assert_eq!(axis_top(2000.0, 5.0), 2000.0);
        assert_eq!(axis_top(2001.0, 5.0), 2500.0);
        assert_eq!(axis_top(2100.0, 5.0), 2500.0);
        assert_eq!(axis_top(1234.0, 5.0), 1500.0);
        assert_eq!(axis_top(12.0, 5.0), 15.0);
        assert_eq!(axis_top(66.7, 1.0), 80.0);
        assert_eq!(axis_top(3500.0, 5.0), 4000.0);
        assert_eq!(axis_top(7000.0, 5.0), 8000.0);
        assert_eq!(axis_top(9000.0, 5.0), 10000.0);
        assert_eq!(axis_top(999_999.0, 5.0), 1_000_000.0);
        // Never more than a quarter above the data past the first step of each decade.
        for max in (6..100_000).step_by(7) {
            let top = axis_top(max as f64, 5.0);
            assert!(top >= max as f64, "{max}: {top}");
            assert!(
                top <= max as f64 * 1.5,
                "{max}: {top} is far above the data"
            );
        }
        // Every tick is a round figure: whole counts from a top of 5 or more.
        for top in [
            5.0, 6.0, 8.0, 15.0, 25.0, 30.0, 40.0, 60.0, 80.0, 1500.0, 2500.0,
        ] {
            let ticks = ticks(top);
            assert_eq!(ticks.first(), Some(&0.0));
            assert_eq!(ticks.last(), Some(&top), "{top}");
            assert!(ticks.len() >= 4, "{top}: {ticks:?}");
            assert!(ticks.iter().all(|t| t.fract() == 0.0), "{top}: {ticks:?}");
        }
        assert_eq!(ticks(2500.0), [0.0, 500.0, 1000.0, 1500.0, 2000.0, 2500.0]);
        assert_eq!(ticks(1500.0), [0.0, 500.0, 1000.0, 1500.0]);
    }

    #[test]
    fn the_value_labels_get_room_for_their_longest_figure() {
        let short = line_left(&ticks(5.0), "");
        let long = line_left(&ticks(1_000_000.0), "");
        assert!(long >= 12.0 + CHAR_WIDTH * 7.0 && short < long);
        let svg = line_chart(&text(""), &[("a".to_string(), 2000.0)]).into_string();
        assert!(svg.contains(">2000<") && !svg.contains(">5000<"), "{svg}");
        assert!(
            !svg.contains("rotate("),
            "the axis name is a line of its own"
        );
    }

    #[test]
    fn positions_span_the_plot_and_the_top_value_reaches_the_top() {
        let plot = Plot::line(64.0);
        assert_eq!(plot.y(50.0, 50.0), plot.top);
        assert_eq!(plot.y(0.0, 50.0), plot.bottom());
        assert_eq!(plot.y(25.0, 50.0), plot.top + plot.height / 2.0);
        // Out of range values stay inside; a zero axis divides nothing.
        assert_eq!(plot.y(80.0, 50.0), plot.top);
        assert_eq!(plot.y(-1.0, 50.0), plot.bottom());
        assert_eq!(plot.y(3.0, 0.0), plot.bottom());
        assert_eq!(plot.x(0, 3), plot.left);
        assert_eq!(plot.x(2, 3), plot.left + plot.width);
        assert_eq!(plot.x(0, 1), plot.left + plot.width / 2.0);
        assert_eq!(plot.x(0, 0), plot.left + plot.width / 2.0);
    }

    #[test]
    fn bars_reach_the_end_at_the_axis_top_and_bands_do_not_overlap() {
        let plot = Plot::bars(3, 2);
        assert_eq!(plot.along(100.0, 100.0), plot.left + plot.width);
        assert_eq!(plot.along(0.0, 100.0), plot.left);
        assert_eq!(plot.along(f64::NAN, 100.0), plot.left);
        // Each bar starts below the previous one ends; the last ends inside the plot.
        let tops: Vec<f64> = (0..3)
            .flat_map(|g| (0..2).map(move |s| (g, s)))
            .map(|(g, s)| plot.bar_top(g, s, 2))
            .collect();
        assert!(tops.windows(2).all(|w| w[1] >= w[0] + BAR), "{tops:?}");
        assert!(tops.last().unwrap() + BAR <= plot.bottom());
        // No groups: an empty plot, no division by zero.
        assert_eq!(Plot::bars(0, 2).height, 0.0);
    }

    fn text(unit: &'static str) -> ChartText<'static> {
        ChartText {
            id: "c",
            title: "Title",
            description: "What it shows".into(),
            x_label: "x",
            y_label: "y",
            unit,
        }
    }

    #[test]
    fn the_highest_point_is_drawn_at_the_top_and_every_point_has_its_figure() {
        let points = vec![
            ("a".to_string(), 0.0),
            ("b".to_string(), 10.0),
            ("c".to_string(), 5.0),
        ];
        let svg = line_chart(&text(""), &points).into_string();
        assert!(
            svg.contains("role=\"img\"") && svg.contains("<title id=\"c-title\">Title</title>")
        );
        assert!(svg.contains(&format!(
            "cy=\"{}\" r=\"2\" data-label=\"b\" data-value=\"10\"",
            coordinate(LINE_TOP)
        )));
        assert!(svg.contains("data-label=\"a\" data-value=\"0\""));
        assert_eq!(svg.matches("<circle").count(), 3);
        // Empty: axes only, no marks, no NaN.
        let empty = line_chart(&text(""), &[]).into_string();
        assert!(!empty.contains("<circle") && !empty.contains("NaN"));
    }

    #[test]
    fn bars_carry_their_series_and_values() {
        let groups = vec![Group {
            label: "A very long issue subject".into(),
            key: "7".into(),
            values: vec![50.0, 0.0],
        }];
        let svg = grouped_bars(&text("%"), &["Opens", "Clicks"], &groups).into_string();
        assert!(svg.contains("data-key=\"7\""));
        let full = coordinate(Plot::bars(1, 2).width);
        assert!(
            svg.contains(&format!(
                "width=\"{full}\" height=\"{}\" data-series=\"Opens\"",
                coordinate(BAR)
            )),
            "50% on a 50% axis is a full bar: {svg}"
        );
        assert!(svg.contains("data-series=\"Opens\" data-value=\"50.0%\""));
        assert!(svg.contains("data-series=\"Clicks\" data-value=\"0.0%\""));
        assert!(svg.contains(">A very long issue subject<"));
        assert_eq!(short(&"x".repeat(50)).chars().count(), LABEL_CHARS);
        // Counts: whole ticks, never 0.5 of a recipient.
        let counts = vec![Group {
            label: "Day 1".into(),
            key: "1".into(),
            values: vec![2.0, 1.0],
        }];
        let svg = grouped_bars(&text(""), &["Opens", "Clicks"], &counts).into_string();
        assert!(svg.contains(">5</text>") && !svg.contains(">0.5<"), "{svg}");
        let empty = grouped_bars(&text("%"), &["Opens"], &[]).into_string();
        assert!(!empty.contains("<rect") && !empty.contains("NaN"));
    }
}
