//! `broadsheet import SUBDOMAIN FILE|-`: subscribers from CSV, streamed and committed in
//! chunks (even while serve runs), with progress on stderr and a summary on stdout. It has no
//! size limit: the dashboard's upload form sends larger files here.
//!
//! The rest of the import: `domain::subscribers::import` (the streaming import this command
//! runs) and `domain::subscribers::import_columns` (how columns are read),
//! `web::subscribers::import` (the dashboard's upload, at most `import::UPLOAD_LIMIT`) and
//! `jobs::import_subscribers` (the job that imports a dashboard upload).

use std::fs::File;
use std::io::{IsTerminal, Read};
use std::path::Path;
use std::time::Instant;

use indicatif::{HumanBytes, ProgressBar, ProgressStyle};

use super::{
    EXIT_FAILURE, EXIT_NOT_FOUND, EXIT_ROWS_REFUSED, Failure, by_subdomain, open_migrated, usage,
};
use crate::domain::subscribers::import::{self, Columns, Observer, Source, Totals};

/// Where `import` reads from: a file (its size known, for the progress) or standard input.
fn open_input(csv: &Path) -> Result<(Box<dyn Read + Send>, Option<u64>), Failure> {
    if csv == Path::new("-") {
        // Not locked: the import reads on a thread of its own.
        return Ok((Box::new(std::io::stdin()), None));
    }
    let cannot = |e: std::io::Error| Failure {
        code: if e.kind() == std::io::ErrorKind::NotFound {
            EXIT_NOT_FOUND
        } else {
            EXIT_FAILURE
        },
        message: format!("cannot read {}: {e}", csv.display()),
    };
    let file = File::open(csv).map_err(cannot)?;
    let meta = file.metadata().map_err(cannot)?;
    if meta.is_dir() {
        return Err(usage(format!(
            "{} is a directory, not a CSV file",
            csv.display()
        )));
    }
    Ok((Box::new(file), Some(meta.len())))
}

/// The progress of `import` on stderr: a bar on a terminal, else a line per tenth of the file
/// (per 100,000 rows from standard input) so logs stay short.
struct ImportProgress {
    bar: Option<ProgressBar>,
    total: Option<u64>,
    last_step: u64,
    /// How the header was read, for the summary.
    columns: Option<(Source, String)>,
}

impl ImportProgress {
    fn new(total: Option<u64>) -> Self {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = match total {
                Some(len) => ProgressBar::new(len).with_style(
                    ProgressStyle::with_template(
                        "importing [{bar:40}] {bytes}/{total_bytes} ({percent}%) {msg} {elapsed}",
                    )
                    .expect("static template")
                    .progress_chars("=> "),
                ),
                None => ProgressBar::new_spinner().with_style(
                    ProgressStyle::with_template("importing {spinner} {bytes} {msg} {elapsed}")
                        .expect("static template"),
                ),
            };
            bar.enable_steady_tick(std::time::Duration::from_millis(200));
            bar
        });
        ImportProgress {
            bar,
            total,
            last_step: 0,
            columns: None,
        }
    }
}

impl Observer for ImportProgress {
    fn columns(&mut self, columns: &Columns) {
        self.columns = Some((columns.source, columns.summary()));
    }

    fn committed(&mut self, totals: &Totals, bytes_read: u64) {
        if let Some(bar) = &self.bar {
            bar.set_position(bytes_read);
            bar.set_message(format!("{} rows", totals.rows));
            return;
        }
        let (step, of) = match self.total {
            Some(total) if total > 0 => (
                bytes_read.saturating_mul(10) / total,
                format!(" of {} ({}%)", HumanBytes(total), bytes_read * 100 / total),
            ),
            _ => (totals.rows / 100_000, String::new()),
        };
        if step > self.last_step {
            self.last_step = step;
            eprintln!(
                "import: {} rows, {}{of}",
                totals.rows,
                HumanBytes(bytes_read)
            );
        }
    }
}

pub(super) fn run(data_dir: &Path, subdomain: &str, csv: &Path) -> Result<(), Failure> {
    let mut conn = open_migrated(data_dir)?;
    let newsletter = by_subdomain(&conn, subdomain)?;
    let (input, total) = open_input(csv)?;
    let started = Instant::now();
    let mut progress = ImportProgress::new(total);
    let result = import::import_csv(
        &mut conn,
        newsletter.id,
        input,
        Totals::default(),
        &mut progress,
    );
    if let Some(bar) = &progress.bar {
        bar.finish_and_clear();
    }
    let totals = result.map_err(|e| {
        let mut failure = Failure::from(e);
        let source = if csv == Path::new("-") {
            "standard input".to_string()
        } else {
            csv.display().to_string()
        };
        failure.message = format!("{source}: {}", failure.message);
        failure
    })?;
    let seconds = started.elapsed().as_secs_f64();
    println!(
        "imported {} into {}: {} rows in {seconds:.1} s",
        csv.display(),
        newsletter.subdomain,
        totals.rows
    );
    if let Some((source, columns)) = &progress.columns {
        println!("  read as   {}: {columns}", source.label());
    }
    println!("  created   {}", totals.created);
    println!(
        "  existing  {} (already subscribed, left unchanged)",
        totals.existing
    );
    println!(
        "  skipped   {} (unsubscribed or bounced in the file)",
        totals.skipped
    );
    println!("  refused   {}", totals.error_count);
    if totals.error_count == 0 {
        return Ok(());
    }
    println!("refused rows:");
    for e in &totals.errors {
        println!("  line {}: {:?}: {}", e.line, e.email, e.reason);
    }
    let unlisted = totals.error_count - totals.errors.len() as u64;
    if unlisted > 0 {
        println!("  and {unlisted} more, not listed");
    }
    Err(Failure {
        code: EXIT_ROWS_REFUSED,
        message: format!(
            "{} of {} rows were refused (listed above); fix them and import the file again",
            totals.error_count, totals.rows
        ),
    })
}
