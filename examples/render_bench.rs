//! Render benchmark (not a test): how long the Markdown renderer takes on the costliest shapes
//! known, at the sizes the content limits allow, and what the limits do with each.
//!
//! ```text
//! cargo run --example render_bench            # the build the tests run (dependencies at opt-level 1)
//! cargo run --release --example render_bench  # as installed
//! ```
//!
//! For each shape: whether the shape check (`domain::content::shape_problem`) refuses it and how
//! long the check took; for the shapes it lets through, the time of one render
//! (`domain::content::markdown_html::markdown_to_html`, what `serve`'s child process runs) and the HTML's size.
//! Each render runs in a child process of this program (`render_bench --render N`), one at a
//! time, and is killed after 30 s, so an overrun never slows the next measurement.

use std::io::Read;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use broadsheet::domain::content::markdown_html::markdown_to_html;
use broadsheet::domain::content::{MAX_BYTES, RENDER_BUDGET, shape_problem};

/// How long one render may run before the table says "over 30 s".
const PATIENCE: Duration = Duration::from_secs(30);

/// `unit` repeated up to the content limit.
fn filled(unit: &str) -> String {
    unit.repeat(MAX_BYTES / unit.len())
}

fn table(columns: usize, rows: usize) -> String {
    let row = format!("|{}\n", "a|".repeat(columns));
    format!("{row}|{}\n{}", "-|".repeat(columns), row.repeat(rows))
}

/// A long issue as people write it: headings, paragraphs with links and emphasis, quotes,
/// nested lists, a table and a code block now and then.
fn long_newsletter() -> String {
    let mut text = String::new();
    let mut section = 0;
    loop {
        section += 1;
        let mut part = format!("## Section {section}: what happened this week\n\n");
        part += &format!(
            "The **first** thing to know is that [the report](https://example.com/reports/{section}?utm_source=news) \
             came out, and *everyone* read it. It says that `config_{section}` matters more than you think. \
             Some people on www.example.org disagreed; see https://example.net/thread/{section}.\n\n"
        );
        part +=
            "> A quote from someone *important*, with a [link](https://example.com/q) in it.\n\n";
        part += "- First point, with **bold** text\n- Second point ~~struck~~ and `code`\n  - A nested point\n- Third point\n\n";
        if section % 5 == 0 {
            part += "| Name | Value | Change |\n|---|---:|:---:|\n| alpha | 1 | +1% |\n| beta | 2 | -2% |\n\n";
            part += "```rust\nfn main() {\n    println!(\"hello\");\n}\n```\n\n";
        }
        part += "Plain prose follows, the kind of paragraph most of a newsletter is made of: sentences \
                 about the topic, the people and the numbers, with little markup beyond some emphasis.\n\n";
        if text.len() + part.len() > MAX_BYTES {
            return text;
        }
        text += &part;
    }
}

fn shapes() -> Vec<(&'static str, String)> {
    vec![
        (
            "`* ` x 8000 + `a` (nesting on one line)",
            "* ".repeat(8000) + "a",
        ),
        ("`1. ` x 1000 + `a`", "1. ".repeat(1000) + "a"),
        ("`> - ` x 1000 + `a`", "> - ".repeat(1000) + "a"),
        ("table of 1000 columns, 3 rows", table(1000, 3)),
        ("table of 16 columns, 2000 rows", table(16, 2000)),
        ("1 MB of prose", "word ".repeat(200_000)),
        ("long newsletter (prose, links, lists)", long_newsletter()),
        ("16 levels of nested list lines", {
            filled(
                &(0..16)
                    .map(|i| format!("{}- a\n", "  ".repeat(i)))
                    .collect::<String>(),
            )
        }),
        ("`>` x 16 per line", filled(&(">".repeat(16) + " a\n"))),
        (
            "10 tables of 8 columns, 4,900 cells",
            (table(8, 48) + "\n").repeat(10),
        ),
        ("bare e-mail addresses (most HTML)", filled("a@b.co ")),
        ("`www.a.b ` autolinks", filled("www.a.b ")),
        ("`a\\n` (one paragraph of short lines)", filled("a\n")),
        ("`a\\n\\n` (short paragraphs)", filled("a\n\n")),
        ("`-\\n*\\n` (alternating lists)", filled("-\n*\n")),
        ("`*a* ` (dense emphasis)", filled("*a* ")),
        ("`[a](b) ` (dense links)", filled("[a](b) ")),
        ("`![a](b) ` (dense images)", filled("![a](b) ")),
        ("`[ (](` (unclosed link targets)", filled("[ (](")),
        ("`<!--` (unclosed comments)", filled("<!--")),
    ]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let [_, flag, n] = args.as_slice()
        && flag == "--render"
    {
        let markdown = &shapes()[n.parse::<usize>().expect("a shape number")].1;
        let started = Instant::now();
        let html = markdown_to_html(markdown);
        println!("{} {}", started.elapsed().as_millis(), html.len());
        return;
    }
    println!("| shape | bytes | shape check | render | HTML bytes |\n|---|---:|---|---:|---:|");
    for (number, (name, markdown)) in shapes().into_iter().enumerate() {
        let started = Instant::now();
        let problem = shape_problem(&markdown);
        let checked = started.elapsed();
        let check = match &problem {
            Some(why) => format!("refused in {checked:.1?}: {why}"),
            None => format!("passes ({checked:.1?})"),
        };
        let (render, html) = if problem.is_some() {
            ("-".to_string(), "-".to_string())
        } else {
            timed_render(number)
        };
        println!(
            "| {name} | {} | {check} | {render} | {html} |",
            markdown.len()
        );
    }
    println!(
        "\nRenders over the budget ({} s) are refused at save; in `serve` the child is killed then.",
        RENDER_BUDGET.as_secs()
    );
}

/// Shape `number` rendered in a child process: its time and HTML size, or "over 30 s".
fn timed_render(number: usize) -> (String, String) {
    let mut child = Command::new(std::env::current_exe().expect("this program"))
        .args(["--render", &number.to_string()])
        .stdout(Stdio::piped())
        .spawn()
        .expect("starting a render");
    let mut output = child.stdout.take().expect("piped stdout");
    let (done, finished) = mpsc::channel();
    std::thread::spawn(move || {
        let mut text = String::new();
        let _ = output.read_to_string(&mut text);
        let _ = done.send(text);
    });
    let answer = finished.recv_timeout(PATIENCE);
    let _ = child.kill();
    let _ = child.wait();
    let Ok(text) = answer else {
        return (format!("over {} s", PATIENCE.as_secs()), "-".to_string());
    };
    let mut fields = text.split_whitespace();
    let (millis, size): (u128, &str) = (
        fields
            .next()
            .and_then(|m| m.parse().ok())
            .expect("the render's time"),
        fields.next().expect("the HTML's size"),
    );
    let verdict = if millis > RENDER_BUDGET.as_millis() {
        " (over budget)"
    } else {
        ""
    };
    (format!("{millis} ms{verdict}"), size.to_string())
}
