//! Markdown to HTML (or to plain text) within a time budget. The `markdown` crate's time grows with the square of
//! some shapes of input (its edit lists are searched linearly: wooorm/markdown-rs#113, #218), so
//! a render that overruns must be stopped, and a thread cannot be. `serve` therefore renders in
//! a child process of its own binary (`broadsheet render-markdown`), killed when the budget
//! runs out; elsewhere (unit tests, library use) the render runs on a thread that is abandoned
//! instead, finishing in the background in a time bounded by the content limits.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::domain::content::markdown_html::markdown_to_html;
use crate::domain::content::markdown_text::markdown_to_text;

/// The hidden subcommand that renders standard input to standard output.
pub const SUBCOMMAND: &str = "render-markdown";

/// Renders running at once; more wait for a slot (within their budget), so renders never take
/// more than this many cores from the readers.
const AT_ONCE: usize = 2;

/// What a render makes of Markdown. Both parse the source the same way, so both cost the
/// same and both run within the budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    /// The HTML of the pages and of the mail's HTML part.
    Html,
    /// The plain text of the mail's text part ([`markdown_to_text`]).
    Text,
}

impl Output {
    /// The flag of `render-markdown` that asks for plain text.
    pub const TEXT_FLAG: &'static str = "--text";

    fn render(self, source: &str) -> String {
        match self {
            Output::Html => markdown_to_html(source),
            Output::Text => markdown_to_text(source),
        }
    }
}

/// Why a render gave no output.
#[derive(Debug)]
pub enum RenderFailure {
    /// It did not finish within the budget, and was stopped (or, on a thread, abandoned).
    TooSlow,
    /// Other renders held every slot until the budget ran out.
    Busy,
    /// The renderer failed on this input (the child exited with an error or was killed by a
    /// signal, or the thread panicked).
    Crashed(String),
    /// The child process could not be started or talked to.
    Io(std::io::Error),
}

static CHILD_BINARY: OnceLock<PathBuf> = OnceLock::new();

/// From now on, renders run in child processes of `binary` (the server's own executable),
/// which can be killed when they overrun.
pub fn use_child_processes(binary: PathBuf) {
    let _ = CHILD_BINARY.set(binary);
}

/// The running executable, as the child processes should start it: `/proc/self/exe` still
/// starts this very binary after an upgrade has replaced the file on disk.
pub fn own_binary() -> std::io::Result<PathBuf> {
    let proc_self = PathBuf::from("/proc/self/exe");
    if proc_self.exists() {
        Ok(proc_self)
    } else {
        std::env::current_exe()
    }
}

/// `source` as `output`, if that takes less than `budget`, waiting for a slot included.
pub fn render_within(
    source: &str,
    output: Output,
    budget: Duration,
) -> Result<String, RenderFailure> {
    let deadline = Instant::now() + budget;
    let slot = Slot::take(deadline).ok_or(RenderFailure::Busy)?;
    match CHILD_BINARY.get() {
        Some(binary) => in_child(binary, source, output, deadline),
        None => on_thread(source, output, slot, deadline),
    }
}

/// The body of `broadsheet render-markdown`: Markdown on standard input, `output` on standard
/// output.
pub fn child_main(output: Output) -> std::io::Result<()> {
    let mut source = String::new();
    std::io::stdin().read_to_string(&mut source)?;
    let rendered = output.render(&source);
    let mut out = std::io::stdout().lock();
    out.write_all(rendered.as_bytes())?;
    out.flush()
}

fn in_child(
    binary: &Path,
    source: &str,
    output: Output,
    deadline: Instant,
) -> Result<String, RenderFailure> {
    let mut command = Command::new(binary);
    command.arg(SUBCOMMAND);
    if output == Output::Text {
        command.arg(Output::TEXT_FLAG);
    }
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(RenderFailure::Io)?;
    let (mut input, mut rendered) = (
        child.stdin.take().expect("piped stdin"),
        child.stdout.take().expect("piped stdout"),
    );
    let source = source.to_owned();
    let (done, finished) = mpsc::channel();
    // The child reads all of its input before it writes, so one thread can write, then read.
    // It ends when the child does: killed, the child closes both pipes.
    std::thread::spawn(move || {
        let written = input.write_all(source.as_bytes());
        drop(input);
        let mut html = Vec::new();
        let read = rendered.read_to_end(&mut html);
        let _ = done.send(written.and(read).map(|_| html));
    });
    let outcome = finished.recv_timeout(deadline.saturating_duration_since(Instant::now()));
    if !matches!(outcome, Ok(Ok(_))) {
        let _ = child.kill();
    }
    let status = child.wait().map_err(RenderFailure::Io)?;
    match outcome {
        Ok(Ok(html)) if status.success() => {
            String::from_utf8(html).map_err(|e| RenderFailure::Crashed(e.to_string()))
        }
        Ok(Ok(_)) => Err(RenderFailure::Crashed(format!(
            "the renderer exited with {status}"
        ))),
        Ok(Err(e)) => Err(RenderFailure::Crashed(format!(
            "the renderer's pipes broke: {e}"
        ))),
        Err(RecvTimeoutError::Timeout) => Err(RenderFailure::TooSlow),
        Err(RecvTimeoutError::Disconnected) => Err(RenderFailure::Crashed(
            "the renderer's pipe thread ended without an answer".into(),
        )),
    }
}

/// Renders on a thread of its own; past the deadline the thread is left to finish, holding
/// its slot until it does, so abandoned renders still count against [`AT_ONCE`].
fn on_thread(
    source: &str,
    output: Output,
    slot: Slot,
    deadline: Instant,
) -> Result<String, RenderFailure> {
    let source = source.to_owned();
    let (done, finished) = mpsc::channel();
    std::thread::Builder::new()
        .name("render-markdown".into())
        .spawn(move || {
            let html = output.render(&source);
            drop(slot);
            let _ = done.send(html);
        })
        .map_err(RenderFailure::Io)?;
    match finished.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
        Ok(html) => Ok(html),
        Err(RecvTimeoutError::Timeout) => Err(RenderFailure::TooSlow),
        Err(RecvTimeoutError::Disconnected) => {
            Err(RenderFailure::Crashed("the renderer panicked".into()))
        }
    }
}

/// One of the [`AT_ONCE`] render slots, given back when dropped.
struct Slot;

static TAKEN: Mutex<usize> = Mutex::new(0);
static FREED: Condvar = Condvar::new();

impl Slot {
    /// Waits for a free slot until `deadline`.
    fn take(deadline: Instant) -> Option<Slot> {
        let mut taken = TAKEN.lock().unwrap_or_else(|e| e.into_inner());
        while *taken >= AT_ONCE {
            let left = deadline.checked_duration_since(Instant::now())?;
            taken = FREED
                .wait_timeout(taken, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        *taken += 1;
        Some(Slot)
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        *TAKEN.lock().unwrap_or_else(|e| e.into_inner()) -= 1;
        FREED.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_on_a_thread_outside_serve() {
        let html = render_within("**b**", Output::Html, Duration::from_secs(5)).unwrap();
        assert_eq!(html, markdown_to_html("**b**"));
        let text = render_within("**b**", Output::Text, Duration::from_secs(5)).unwrap();
        assert_eq!(text, "b");
    }

    #[test]
    fn an_overrun_is_refused_as_too_slow() {
        // Quadratic in the renderer: far more than a millisecond in any build.
        let slow = "*a* ".repeat(2_000);
        assert!(matches!(
            render_within(&slow, Output::Text, Duration::from_millis(1)),
            Err(RenderFailure::TooSlow)
        ));
    }
}
