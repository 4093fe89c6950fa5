//! Subscribers as CSV, both ways: the one streaming import that `broadsheet import` and the
//! dashboard's upload share, the export they read back, and the dashboard's uploads waiting
//! for (or going through) their import job.
//!
//! The format: a header line is required; columns are found by name in any order (`email`
//! required, `name`, `tags` and `status` optional, any other column ignored). The tags of a
//! row are separated by `;` inside the tags field. A `status` of `unsubscribed` or `bounced`
//! skips the row, so re-importing an export never resubscribes someone who left. Mailchimp's
//! and Substack's exports are read as they come, names, tags and subscription dates
//! included (`domain::subscribers::import_columns`).
//!
//! Rows are checked with the API's rules (`subscribers::check`) and committed [`BATCH_ROWS`]
//! to a transaction (`subscribers::insert_checked`, which also records `subscriber.created`
//! when a webhook listens). An address already
//! present counts as existing and is left as it is, so running an interrupted import again
//! creates no duplicates. Memory stays flat in the size of the file: two batches (one being
//! committed, the next read ahead) and the first [`ERRORS_KEPT`] refused rows are all that is
//! held.
//!
//! The rest of the import: `domain::subscribers::import_columns` (how a file's columns are
//! read), `domain::subscribers::import_lines` (the line of the file each row is on),
//! `web::subscribers::import` (the dashboard's upload, preview, progress and result pages),
//! `jobs::import_subscribers` (the job that imports an upload) and `cli::import`
//! (`broadsheet import`); docs/subscribers.md ("Import CSV").

use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use csv::{ByteRecord, WriterBuilder};
use rusqlite::{Connection, OptionalExtension, Row};

use crate::clock::{self, Timestamp};
use crate::domain::content::merge_tags::value_text;
use crate::domain::subscribers;
use crate::domain::subscribers::custom_fields::{self, CustomField};
pub use crate::domain::subscribers::import_columns::{ColumnUse, Columns, Source, TAG_SEPARATOR};
use crate::domain::subscribers::import_columns::{Extras, Parsed, header_error};
use crate::domain::subscribers::import_lines::Rows;
use crate::domain::subscribers::memberships;
use crate::domain::subscribers::origin::{self, Origin};
use crate::domain::{DomainError, DomainResult, ErrorCode, FieldErrors, newsletters};
use crate::store::{StoreError, write_tx};

/// Rows committed per transaction: about 70 ms of the database's writer in a release build, and
/// a hundred commits (each an fsync) per million rows; 1,000 made the fsyncs cost as much as the
/// inserts on a busy disk (docs/performance.md, "Importing 1,000,000 subscribers").
pub const BATCH_ROWS: usize = 10_000;
/// Refused rows reported with their line (`Totals::errors`, the CLI's report, the import
/// page's table); later ones are only counted.
pub const ERRORS_KEPT: usize = 100;
/// Refused rows a dashboard import stores for its download (`refused_csv`), about 10 MB at
/// the most; later ones are only counted. A 50 MiB upload could hold millions of refused
/// rows; a file that bad is better fixed whole than read row by row.
pub const ERRORS_STORED: u64 = 100_000;
/// The largest file the dashboard accepts; larger ones go through `broadsheet import`.
pub const UPLOAD_LIMIT: u64 = 50 * 1024 * 1024;
/// Uploads one owner may have on disk at once, across all their newsletters: waiting for
/// their start, queued or being imported (a file goes once its import ends). Without it an
/// account could fill the server's disk with files it never imports.
pub const OWNER_UPLOADS: u64 = 3;
/// The bytes those uploads may hold together: two files at the per-file limit.
pub const OWNER_UPLOAD_BYTES: u64 = 100 * 1024 * 1024;
/// The columns of an export, in order.
pub const EXPORT_HEADER: [&str; 9] = [
    "email",
    "name",
    "tags",
    "status",
    "subscribed_at",
    "unsubscribed_at",
    "created_at",
    "membership",
    "membership_until",
];

/// A refused row: its line in the file, the address as written, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowError {
    pub line: u64,
    pub email: String,
    pub reason: String,
}

/// Counts of an import so far.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Totals {
    /// Data rows read and committed (the header is not counted).
    pub rows: u64,
    pub created: u64,
    /// Already subscribed (or repeated in the file): left as they are.
    pub existing: u64,
    /// Marked unsubscribed or bounced in the file's status column.
    pub skipped: u64,
    /// Refused rows, all of them.
    pub error_count: u64,
    /// The first refused rows of this run, while `error_count` is below [`ERRORS_KEPT`].
    pub errors: Vec<RowError>,
}

/// Hooks of a running import. `committing` runs inside each batch's transaction, so what it
/// records commits with the batch (the dashboard's job records its progress there);
/// `committed` runs after the commit (the CLI's progress bar).
pub trait Observer {
    /// The header was read: what each column is used for.
    fn columns(&mut self, _columns: &Columns) {}

    /// `refused`: every row of the batch that was refused (`totals.errors` keeps only the
    /// first [`ERRORS_KEPT`] of the import).
    fn committing(
        &mut self,
        _tx: &Connection,
        _totals: &Totals,
        _refused: &[RowError],
        _bytes_read: u64,
    ) -> DomainResult<()> {
        Ok(())
    }

    fn committed(&mut self, _totals: &Totals, _bytes_read: u64) {}

    /// Asked after each committed batch; false stops the import there (the server is
    /// stopping), to be resumed from that batch later.
    fn keep_going(&self) -> bool {
        true
    }
}

/// No hooks.
impl Observer for () {}

/// The records of `input` with the file's own line numbers (the header is line 1).
fn reader<R: Read>(input: R) -> Rows<R> {
    Rows::new(input)
}

fn csv_error(e: csv::Error) -> DomainError {
    match e.into_kind() {
        csv::ErrorKind::Io(io) => DomainError::Store(StoreError::Io(io)),
        other => DomainError::Store(StoreError::Io(std::io::Error::other(format!(
            "unreadable CSV: {other:?}"
        )))),
    }
}

fn read_header<R: Read>(reader: &mut Rows<R>, fields: &[CustomField]) -> DomainResult<Columns> {
    let mut record = ByteRecord::new();
    if reader.next(&mut record).map_err(csv_error)?.is_none() {
        record.clear();
    }
    Columns::parse(&record, fields)
}

/// Checks the header of `input` alone, with the newsletter's custom `fields`.
pub fn check_header<R: Read>(input: R, fields: &[CustomField]) -> DomainResult<Columns> {
    read_header(&mut reader(input), fields)
}

/// A batch of rows read and checked, to be committed together.
#[derive(Default)]
struct Batch {
    rows: u64,
    valids: Vec<subscribers::Valid>,
    /// What else the file gives (paid access, field values), by index into `valids`.
    extras: Vec<(usize, Extras)>,
    skipped: u64,
    /// Refused rows, in the order of the file.
    refused: Vec<RowError>,
    /// Where the reader stood after the batch's last row.
    bytes_read: u64,
}

impl Batch {
    /// A full batch: more rows may follow.
    fn is_full(&self) -> bool {
        self.rows as usize >= BATCH_ROWS
    }
}

/// Imports the CSV `input` into the newsletter, committing every [`BATCH_ROWS`] rows.
/// `resume` is [`Totals::default`] for a new import, or the totals an interrupted run
/// committed: that many rows are read again and passed over, and the counts go on from there.
///
/// The rows are read, parsed and checked on a thread of their own while this one inserts and
/// commits the batch before (the two overlap, docs/performance.md): the reader is at most one
/// batch ahead, so memory stays at about two batches. A batch read ahead but not committed
/// when the import stops is read again by the resumed run, like any uncommitted batch. The
/// WAL is checkpointed beside the commits (`store::with_checkpointer`), which stay FULL.
pub fn import_csv<R: Read + Send>(
    conn: &mut Connection,
    newsletter_id: i64,
    input: R,
    resume: Totals,
    observer: &mut dyn Observer,
) -> DomainResult<Totals> {
    newsletters::get(conn, newsletter_id)?.ensure_writable()?;
    let mut reader = reader(input);
    let fields = custom_fields::list(conn, newsletter_id)?;
    let columns = read_header(&mut reader, &fields)?;
    observer.columns(&columns);
    let mut totals = resume;
    let mut record = ByteRecord::new();
    for _ in 0..totals.rows {
        if reader.next(&mut record).map_err(csv_error)?.is_none() {
            break;
        }
    }
    crate::store::with_checkpointer(conn, |conn, committed| {
        std::thread::scope(|scope| {
            // A rendezvous: the reader hands a batch over only when the writer takes it.
            let (hand_over, batches) = std::sync::mpsc::sync_channel::<DomainResult<Batch>>(0);
            scope.spawn(move || {
                loop {
                    let batch = read_batch(&mut reader, &columns, &mut record);
                    let more = matches!(&batch, Ok(b) if b.is_full());
                    // A send fails when the writer has stopped (an error, or `keep_going`).
                    if hand_over.send(batch).is_err() || !more {
                        return;
                    }
                }
            });
            while let Ok(batch) = batches.recv() {
                let batch = batch?;
                if batch.rows == 0 {
                    break;
                }
                let more = batch.is_full();
                totals = commit(conn, newsletter_id, batch, &totals, observer)?;
                committed();
                if !more || !observer.keep_going() {
                    break;
                }
            }
            Ok(totals)
        })
    })
}

/// Reads up to [`BATCH_ROWS`] rows and checks each with the API's rules (no database needed);
/// a batch of no rows at the end of the file.
fn read_batch<R: Read>(
    reader: &mut Rows<R>,
    columns: &Columns,
    record: &mut ByteRecord,
) -> DomainResult<Batch> {
    let mut batch = Batch::default();
    while !batch.is_full() {
        let Some(line) = reader.next(record).map_err(csv_error)? else {
            break;
        };
        batch.rows += 1;
        let refused = match columns.read(record) {
            Parsed::Entry(entry, extras) => match subscribers::check(line as usize, entry)? {
                Ok(valid) => {
                    if !extras.is_empty() {
                        batch.extras.push((batch.valids.len(), extras));
                    }
                    batch.valids.push(valid);
                    continue;
                }
                Err(refused) => RowError {
                    line,
                    email: refused.email.trim().to_string(),
                    reason: refused.message,
                },
            },
            Parsed::Skipped => {
                batch.skipped += 1;
                continue;
            }
            Parsed::Refused { email, reason } => RowError {
                line,
                email,
                reason,
            },
        };
        batch.refused.push(refused);
    }
    batch.bytes_read = reader.bytes_read();
    Ok(batch)
}

fn commit(
    conn: &mut Connection,
    newsletter_id: i64,
    batch: Batch,
    before: &Totals,
    observer: &mut dyn Observer,
) -> DomainResult<Totals> {
    let bytes_read = batch.bytes_read;
    let after = write_tx(conn, |tx| {
        let ids = subscribers::insert_checked_ids(
            tx,
            newsletter_id,
            &batch.valids,
            &Origin::of(origin::Source::Import),
        )?;
        let created = ids.iter().flatten().count();
        let existing = ids.len() - created;
        // Only a subscriber the file brings gets its membership and field values: an
        // existing one keeps theirs.
        for (at, extras) in &batch.extras {
            let Some(id) = ids[*at] else { continue };
            if let Some(grant) = &extras.grant {
                memberships::grant(tx, newsletter_id, id, grant)?;
            }
            custom_fields::put_values(tx, id, &extras.values)?;
        }
        let refused = batch.refused.len() as u64;
        let kept = ERRORS_KEPT.saturating_sub(before.error_count as usize);
        let mut after = before.clone();
        after.rows += batch.rows;
        after.created += created as u64;
        after.existing += existing as u64;
        after.skipped += batch.skipped;
        after.error_count += refused;
        after
            .errors
            .extend(batch.refused.iter().take(kept).cloned());
        observer.committing(tx, &after, &batch.refused, bytes_read)?;
        Ok::<_, DomainError>(after)
    })?;
    observer.committed(&after, bytes_read);
    Ok(after)
}

/// One data row as the preview shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreviewRow {
    pub line: u64,
    pub email: String,
    pub name: String,
    pub tags: Vec<String>,
    pub subscribed_at: Option<Timestamp>,
    /// Why the import would refuse or skip it.
    pub problem: Option<String>,
}

/// The header and the first rows of a file, checked as the import would check them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Preview {
    pub columns: Columns,
    pub rows: Vec<PreviewRow>,
}

/// Reads the header and up to `limit` rows of `input`, with the newsletter's custom `fields`.
pub fn preview<R: Read>(input: R, fields: &[CustomField], limit: usize) -> DomainResult<Preview> {
    let mut reader = reader(input);
    let columns = read_header(&mut reader, fields)?;
    let mut rows = Vec::new();
    let mut record = ByteRecord::new();
    while rows.len() < limit {
        let Some(line) = reader.next(&mut record).map_err(csv_error)? else {
            break;
        };
        rows.push(match columns.read(&record) {
            Parsed::Entry(entry, _) => PreviewRow {
                line,
                problem: subscribers::validate(&entry).err().map(|e| e.to_string()),
                email: entry.email,
                name: entry.name.unwrap_or_default(),
                tags: entry.tags,
                subscribed_at: entry.subscribed_at,
            },
            Parsed::Skipped => PreviewRow {
                line,
                email: cell_text(&record, columns.email_at()),
                name: String::new(),
                tags: Vec::new(),
                subscribed_at: None,
                problem: Some(
                    "Skipped: unsubscribed, bounced or e-mail turned off in the file".to_string(),
                ),
            },
            Parsed::Refused { email, reason } => PreviewRow {
                line,
                email,
                name: String::new(),
                tags: Vec::new(),
                subscribed_at: None,
                problem: Some(reason),
            },
        });
    }
    Ok(Preview { columns, rows })
}

/// The [`preview`] of a stored upload: its file's header and first rows, read with the
/// newsletter's custom fields as they are now. A file that cannot be read is the outer error.
pub fn preview_upload(
    conn: &Connection,
    upload: &Upload,
    limit: usize,
) -> DomainResult<DomainResult<Preview>> {
    let file = File::open(upload_path(conn, upload)?).map_err(StoreError::from)?;
    let fields = custom_fields::list(conn, upload.newsletter_id)?;
    Ok(preview(file, &fields, limit))
}

fn cell_text(record: &ByteRecord, at: usize) -> String {
    record
        .get(at)
        .map(|b| String::from_utf8_lossy(b).trim().to_string())
        .unwrap_or_default()
}

/// A spreadsheet runs a cell starting with `=`, `+`, `-` or `@` as a formula; exported cells
/// that start so get a leading `'` (OWASP's advice), which the import takes off again.
fn escape_formula(text: &str) -> std::borrow::Cow<'_, str> {
    if text.starts_with(['=', '+', '-', '@']) {
        format!("'{text}").into()
    } else {
        text.into()
    }
}

/// Writes the newsletter's subscribers as CSV (header [`EXPORT_HEADER`], then a column per
/// custom field named as the field; oldest first) to `out`, row by row; returns how many
/// were written.
pub fn export_csv<W: Write>(conn: &Connection, newsletter_id: i64, out: W) -> DomainResult<u64> {
    let fields = custom_fields::list(conn, newsletter_id)?;
    let mut writer = WriterBuilder::new().from_writer(out);
    let header = EXPORT_HEADER
        .iter()
        .copied()
        .chain(fields.iter().map(|f| f.name.as_str()));
    writer.write_record(header).map_err(csv_error)?;
    let mut count = 0;
    subscribers::for_each(conn, newsletter_id, |s| {
        let tags = s.tags.join(&TAG_SEPARATOR.to_string());
        let unsubscribed_at = s.unsubscribed_at.map(|at| at.to_string());
        let member_until = s
            .membership
            .until
            .filter(|_| s.membership.has_paid_access())
            .map(|at| at.to_string());
        let values: Vec<String> = fields
            .iter()
            .map(|f| {
                let value = s.fields.get(&f.name).map(value_text).unwrap_or_default();
                escape_formula(&value).into_owned()
            })
            .collect();
        let own = [
            escape_formula(&s.email).into_owned(),
            escape_formula(s.name.as_deref().unwrap_or("")).into_owned(),
            escape_formula(&tags).into_owned(),
            s.status.as_str().to_string(),
            s.subscribed_at.to_string(),
            unsubscribed_at.unwrap_or_default(),
            s.created_at.to_string(),
            s.membership.status.as_str().to_string(),
            member_until.unwrap_or_default(),
        ];
        writer
            .write_record(own.iter().chain(&values))
            .map_err(csv_error)?;
        count += 1;
        Ok(())
    })?;
    writer
        .flush()
        .map_err(|e| DomainError::Store(StoreError::Io(e)))?;
    Ok(count)
}

crate::string_enum!(
    /// Where a dashboard upload waits for its import.
    pub UploadState {
        /// Previewed; waits for the owner to start it.
        Uploaded => "uploaded",
        Queued => "queued",
        Running => "running",
        Done => "done",
        Failed => "failed",
    }
);

impl UploadState {
    /// Still to finish: the pages keep refreshing.
    pub fn in_progress(self) -> bool {
        matches!(self, UploadState::Queued | UploadState::Running)
    }
}

/// A file uploaded in the dashboard and its import.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upload {
    pub id: i64,
    pub newsletter_id: i64,
    pub file_name: String,
    stored_name: String,
    pub size_bytes: u64,
    pub state: UploadState,
    pub bytes_done: u64,
    /// Counts committed so far (without the refused rows: see [`upload_errors`]).
    pub totals: Totals,
    pub failure: Option<String>,
    pub created_at: Timestamp,
    pub finished_at: Option<Timestamp>,
}

/// The columns `upload_from_row` reads, spliced into each SELECT at compile time.
macro_rules! select_upload {
    ($($tail:literal)+) => {
        concat!(
            "SELECT id, newsletter_id, file_name, stored_name, size_bytes, state, bytes_done, ",
            "rows_done, created, existing, skipped, error_count, failure, created_at, finished_at ",
            "FROM subscriber_imports ", $($tail),+
        )
    };
}

/// A count column: never negative, so a `u64`.
fn count(row: &Row<'_>, at: usize) -> rusqlite::Result<u64> {
    Ok(row.get::<_, i64>(at)?.max(0) as u64)
}

fn upload_from_row(row: &Row<'_>) -> rusqlite::Result<Upload> {
    Ok(Upload {
        id: row.get(0)?,
        newsletter_id: row.get(1)?,
        file_name: row.get(2)?,
        stored_name: row.get(3)?,
        size_bytes: count(row, 4)?,
        state: row.get(5)?,
        bytes_done: count(row, 6)?,
        totals: Totals {
            rows: count(row, 7)?,
            created: count(row, 8)?,
            existing: count(row, 9)?,
            skipped: count(row, 10)?,
            error_count: count(row, 11)?,
            errors: Vec::new(),
        },
        failure: row.get(12)?,
        created_at: row.get(13)?,
        finished_at: row.get(14)?,
    })
}

/// `<data-dir>/imports/`, beside the database file, where uploads wait for their import (so
/// a queued import survives a restart).
pub fn uploads_dir(conn: &Connection) -> DomainResult<PathBuf> {
    let db = conn.path().filter(|p| !p.is_empty()).ok_or_else(|| {
        DomainError::Store(StoreError::Io(std::io::Error::other(
            "an in-memory database has no data directory for uploads",
        )))
    })?;
    let dir = Path::new(db)
        .parent()
        .unwrap_or(Path::new("."))
        .join("imports");
    std::fs::create_dir_all(&dir).map_err(StoreError::from)?;
    Ok(dir)
}

/// A fresh name for an upload's file in [`uploads_dir`].
pub fn new_stored_name() -> String {
    format!("{}.csv", crate::domain::values::secrets::random_hex(16))
}

/// What one owner's uploads on disk leave room for ([`OWNER_UPLOADS`], [`OWNER_UPLOAD_BYTES`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UploadRoom {
    pub files_held: u64,
    pub bytes_held: u64,
}

impl UploadRoom {
    /// Bytes one more file may have.
    pub fn bytes_left(&self) -> u64 {
        OWNER_UPLOAD_BYTES.saturating_sub(self.bytes_held)
    }

    /// Refuses one more file of `size` bytes (0 before its size is known) when it does not
    /// fit, with what the owner can do about it.
    pub fn check(&self, size: u64) -> DomainResult<()> {
        let refuse = |message: String| {
            Err(DomainError::Invalid(
                ErrorCode::LimitReached,
                FieldErrors::single("base", message),
            ))
        };
        if self.files_held >= OWNER_UPLOADS {
            return refuse(format!(
                "You already have {} uploads waiting or being imported, the most an account \
                 may have at once. Start or discard one of them (or let an import finish), \
                 then upload again.",
                self.files_held
            ));
        }
        if size > self.bytes_left() {
            return refuse(format!(
                "Your uploads waiting or being imported already hold {}, and together they \
                 may hold at most {}: this file does not fit. Start or discard one of them, \
                 or split this file.",
                mib(self.bytes_held),
                mib(OWNER_UPLOAD_BYTES)
            ));
        }
        Ok(())
    }
}

/// `bytes` in MiB for people, to a tenth and without a trailing `.0` ("50 MiB", "95.3 MiB").
/// Every text that states an upload limit (the dashboard's, these refusals) is written from
/// the constant with it, so changing a limit changes what every page says.
pub fn mib(bytes: u64) -> String {
    let tenths = format!("{:.1}", bytes as f64 / (1024.0 * 1024.0));
    format!("{} MiB", tenths.strip_suffix(".0").unwrap_or(&tenths))
}

/// The uploads on disk of the owner of `newsletter_id`, over all their newsletters.
pub fn upload_room(conn: &Connection, newsletter_id: i64) -> DomainResult<UploadRoom> {
    const SQL: &str = "SELECT count(*), coalesce(sum(i.size_bytes), 0)
         FROM subscriber_imports i JOIN newsletters n ON n.id = i.newsletter_id
         WHERE n.owner_id = (SELECT owner_id FROM newsletters WHERE id = ?1)
           AND i.state IN ('uploaded', 'queued', 'running')";
    let (files, bytes): (i64, i64) =
        conn.query_row(SQL, [newsletter_id], |r| Ok((r.get(0)?, r.get(1)?)))?;
    Ok(UploadRoom {
        files_held: files.max(0) as u64,
        bytes_held: bytes.max(0) as u64,
    })
}

/// Records a file already written to [`uploads_dir`] as `stored_name`, after checking its
/// header and that it fits in its owner's [`UploadRoom`] (checked again here, in the
/// transaction, as two uploads may arrive at once). A bad header is a validation error, a
/// file that does not fit `limit_reached`; either way the file is removed.
pub fn record_upload(
    conn: &mut Connection,
    newsletter_id: i64,
    file_name: &str,
    stored_name: &str,
) -> DomainResult<Upload> {
    let path = uploads_dir(conn)?.join(stored_name);
    let checked = std::fs::metadata(&path)
        .map_err(|e| DomainError::Store(e.into()))
        .and_then(|meta| {
            if meta.len() == 0 {
                return Err(header_error(
                    "The file is empty: its first line must be a header such as email,name,tags.",
                ));
            }
            let fields = custom_fields::list(conn, newsletter_id)?;
            check_header(File::open(&path).map_err(StoreError::from)?, &fields)?;
            Ok(meta.len())
        });
    let size = match checked {
        Ok(size) => size,
        Err(e) => {
            let _ = std::fs::remove_file(&path);
            return Err(e);
        }
    };
    let file_name: String = file_name
        .trim()
        .chars()
        .filter(|c| !c.is_control())
        .take(200)
        .collect();
    const INSERT: &str = "INSERT INTO subscriber_imports (newsletter_id, file_name, stored_name, size_bytes, created_at, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?5)";
    let recorded = write_tx(conn, |tx| {
        newsletters::get(tx, newsletter_id)?.ensure_writable()?;
        upload_room(tx, newsletter_id)?.check(size)?;
        tx.execute(
            INSERT,
            (
                newsletter_id,
                &file_name,
                stored_name,
                size as i64,
                Timestamp::now(),
            ),
        )?;
        get_upload(tx, newsletter_id, tx.last_insert_rowid())
    });
    if recorded.is_err() {
        let _ = std::fs::remove_file(&path);
    }
    recorded
}

/// One upload of the newsletter; another newsletter's is not found.
pub fn get_upload(conn: &Connection, newsletter_id: i64, id: i64) -> DomainResult<Upload> {
    const SQL: &str = select_upload!("WHERE newsletter_id = ?1 AND id = ?2");
    conn.query_row(SQL, (newsletter_id, id), upload_from_row)
        .optional()?
        .ok_or(DomainError::NotFound("import"))
}

/// The newsletter's latest uploads, newest first.
pub fn recent_uploads(
    conn: &Connection,
    newsletter_id: i64,
    limit: i64,
) -> DomainResult<Vec<Upload>> {
    const SQL: &str = select_upload!("WHERE newsletter_id = ?1 ORDER BY id DESC LIMIT ?2");
    let mut stmt = conn.prepare(SQL)?;
    let uploads = stmt
        .query_map((newsletter_id, limit), upload_from_row)?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(uploads)
}

/// The refused rows an upload's import stored, by line: at most `limit` of those after line
/// `after` (0 for the first), one page of the table's primary key.
pub fn upload_errors(
    conn: &Connection,
    import_id: i64,
    after: u64,
    limit: u64,
) -> DomainResult<Vec<RowError>> {
    const SQL: &str = "SELECT line, email, reason FROM subscriber_import_errors
         WHERE import_id = ?1 AND line > ?2 ORDER BY line LIMIT ?3";
    let mut stmt = conn.prepare_cached(SQL)?;
    let errors = stmt
        .query_map((import_id, after as i64, limit as i64), |r| {
            Ok(RowError {
                line: count(r, 0)?,
                email: r.get(1)?,
                reason: r.get(2)?,
            })
        })?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(errors)
}

/// The columns of the refused rows' download ([`refused_csv`]).
pub const REFUSED_HEADER: [&str; 3] = ["line", "email", "reason"];
/// Refused rows read per query of the download.
const REFUSED_PAGE: u64 = 1_000;

/// Writes the refused rows an upload's import stored (at most [`ERRORS_STORED`]) as CSV to
/// `out`, by line: [`REFUSED_HEADER`], then a page of [`REFUSED_PAGE`] rows at a time by the
/// table's primary key, each page a query of its own, so memory stays at one page and no
/// read stays open while the browser takes its time. Returns how many rows were written.
pub fn refused_csv<W: Write>(conn: &Connection, import_id: i64, out: W) -> DomainResult<u64> {
    let mut writer = WriterBuilder::new().from_writer(out);
    writer.write_record(REFUSED_HEADER).map_err(csv_error)?;
    let (mut after, mut written) = (0, 0);
    loop {
        let page = upload_errors(conn, import_id, after, REFUSED_PAGE)?;
        for e in &page {
            writer
                .write_record([
                    e.line.to_string().as_str(),
                    escape_formula(&e.email).as_ref(),
                    escape_formula(&e.reason).as_ref(),
                ])
                .map_err(csv_error)?;
        }
        written += page.len() as u64;
        match page.last() {
            Some(last) if page.len() as u64 == REFUSED_PAGE => after = last.line,
            _ => break,
        }
    }
    writer
        .flush()
        .map_err(|e| DomainError::Store(StoreError::Io(e)))?;
    Ok(written)
}

/// The path of an upload's file.
pub fn upload_path(conn: &Connection, upload: &Upload) -> DomainResult<PathBuf> {
    Ok(uploads_dir(conn)?.join(&upload.stored_name))
}

fn not_waiting(upload: &Upload) -> DomainError {
    DomainError::rejected(
        ErrorCode::InvalidState,
        format!("This import is {} already", upload.state),
    )
}

/// Queues the import job of an upload that waits for it.
pub fn start_upload(conn: &mut Connection, newsletter_id: i64, id: i64) -> DomainResult<Upload> {
    const QUEUE: &str =
        "UPDATE subscriber_imports SET state = 'queued', updated_at = ?2 WHERE id = ?1";
    write_tx(conn, |tx| {
        newsletters::get(tx, newsletter_id)?.ensure_writable()?;
        let upload = get_upload(tx, newsletter_id, id)?;
        if upload.state != UploadState::Uploaded {
            return Err(not_waiting(&upload));
        }
        tx.execute(QUEUE, (id, Timestamp::now()))?;
        crate::store::jobs::queue_subscriber_import(tx, id)?;
        get_upload(tx, newsletter_id, id)
    })
}

/// Removes an upload that was never started, and its file.
pub fn discard_upload(conn: &mut Connection, newsletter_id: i64, id: i64) -> DomainResult<()> {
    let upload = write_tx(conn, |tx| {
        let upload = get_upload(tx, newsletter_id, id)?;
        if upload.state != UploadState::Uploaded {
            return Err(not_waiting(&upload));
        }
        tx.execute("DELETE FROM subscriber_imports WHERE id = ?1", [id])?;
        Ok(upload)
    })?;
    remove_file(conn, &upload);
    Ok(())
}

fn remove_file(conn: &Connection, upload: &Upload) {
    if let Ok(path) = upload_path(conn, upload)
        && let Err(e) = std::fs::remove_file(&path)
        && e.kind() != std::io::ErrorKind::NotFound
    {
        eprintln!("import: cannot remove {}: {e}", path.display());
    }
}

/// Uploads never started are removed after a day, with their files.
const STALE_AFTER: jiff::SignedDuration = jiff::SignedDuration::from_hours(24);

/// Removes uploads that waited longer than a day for their owner; returns how many.
pub fn purge_stale_uploads(conn: &mut Connection) -> DomainResult<usize> {
    const STALE: &str = select_upload!("WHERE state = 'uploaded' AND created_at < ?1");
    const DELETE: &str = "DELETE FROM subscriber_imports WHERE id = ?1";
    let cutoff = Timestamp::from(clock::now() - STALE_AFTER);
    let stale = conn
        .prepare(STALE)?
        .query_map([&cutoff], upload_from_row)?
        .collect::<Result<Vec<_>, _>>()?;
    for upload in &stale {
        conn.execute(DELETE, [upload.id])?;
        remove_file(conn, upload);
    }
    Ok(stale.len())
}

/// Records a dashboard import's progress and its refused rows (the first [`ERRORS_STORED`])
/// with each batch.
struct Recorder<'a> {
    import_id: i64,
    keep_going: &'a dyn Fn() -> bool,
}

impl Observer for Recorder<'_> {
    fn keep_going(&self) -> bool {
        (self.keep_going)()
    }

    fn committing(
        &mut self,
        tx: &Connection,
        totals: &Totals,
        refused: &[RowError],
        bytes_read: u64,
    ) -> DomainResult<()> {
        const PROGRESS: &str = "UPDATE subscriber_imports SET rows_done = ?2, bytes_done = ?3,
             created = ?4, existing = ?5, skipped = ?6, error_count = ?7, updated_at = ?8
             WHERE id = ?1";
        const ERROR: &str =
            "INSERT OR IGNORE INTO subscriber_import_errors (import_id, line, email, reason)
             VALUES (?1, ?2, ?3, ?4)";
        tx.execute(
            PROGRESS,
            (
                self.import_id,
                totals.rows as i64,
                bytes_read as i64,
                totals.created as i64,
                totals.existing as i64,
                totals.skipped as i64,
                totals.error_count as i64,
                Timestamp::now(),
            ),
        )?;
        let stored_before = (totals.error_count - refused.len() as u64).min(ERRORS_STORED);
        let mut insert = tx.prepare_cached(ERROR)?;
        for e in refused
            .iter()
            .take((ERRORS_STORED - stored_before) as usize)
        {
            insert.execute((self.import_id, e.line as i64, &e.email, &e.reason))?;
        }
        Ok(())
    }
}

/// Marks an import finished (`done`, or `failed` with the reason) and removes its file.
pub fn finish_upload(conn: &Connection, id: i64, failure: Option<&str>) -> DomainResult<()> {
    const FINISH: &str = "UPDATE subscriber_imports SET state = ?2, failure = ?3, finished_at = ?4,
         updated_at = ?4 WHERE id = ?1";
    const SQL: &str = select_upload!("WHERE id = ?1");
    let state = match failure {
        None => UploadState::Done,
        Some(_) => UploadState::Failed,
    };
    conn.execute(FINISH, (id, state, failure, Timestamp::now()))?;
    if let Some(upload) = conn.query_row(SQL, [id], upload_from_row).optional()? {
        remove_file(conn, &upload);
    }
    Ok(())
}

/// The import job's work: imports the upload's file from where its last committed batch
/// ended. Errors of the store are returned (the job tries again later and resumes); anything
/// else ends the import as `failed` with the reason. When `keep_going` turns false (the
/// server is stopping) it stops after the batch under way and answers `None`: the import
/// stays in progress and resumes from there.
pub fn run_upload(
    conn: &mut Connection,
    id: i64,
    keep_going: &dyn Fn() -> bool,
) -> DomainResult<Option<Upload>> {
    const SQL: &str = select_upload!("WHERE id = ?1");
    const RUNNING: &str =
        "UPDATE subscriber_imports SET state = 'running', updated_at = ?2 WHERE id = ?1";
    let upload = conn
        .query_row(SQL, [id], upload_from_row)
        .optional()?
        .ok_or(DomainError::NotFound("import"))?;
    if !upload.state.in_progress() {
        return Ok(Some(upload));
    }
    conn.execute(RUNNING, (id, Timestamp::now()))?;
    let path = upload_path(conn, &upload)?;
    let result = File::open(&path)
        .map_err(|e| {
            DomainError::rejected(
                ErrorCode::InvalidState,
                format!("The uploaded file is gone ({e}); upload it again"),
            )
        })
        .and_then(|file| {
            import_csv(
                conn,
                upload.newsletter_id,
                file,
                upload.totals.clone(),
                &mut Recorder {
                    import_id: id,
                    keep_going,
                },
            )
        });
    match result {
        // Possibly finished just as the stop came: the resumed run finds nothing left.
        Ok(_) if !keep_going() => return Ok(None),
        Ok(_) => finish_upload(conn, id, None)?,
        Err(e @ DomainError::Store(_)) => return Err(e),
        Err(other) => finish_upload(conn, id, Some(&other.to_string()))?,
    }
    get_upload(conn, upload.newsletter_id, id).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::subscribers::NewSubscriber;

    fn db() -> Connection {
        crate::domain::testing::db_with_newsletter("free")
    }

    fn emails(conn: &Connection) -> Vec<String> {
        conn.prepare("SELECT email FROM subscribers WHERE newsletter_id = 1 ORDER BY email")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    }

    fn fresh(conn: &mut Connection, csv: &str) -> DomainResult<Totals> {
        import_csv(conn, 1, csv.as_bytes(), Totals::default(), &mut ())
    }

    #[test]
    fn imports_by_header_name_counts_and_reports_lines() {
        let mut conn = db();
        crate::domain::testing::listen(&mut conn, 1, &["subscriber.created"]);
        let old = NewSubscriber {
            email: "old@example.com".into(),
            ..Default::default()
        };
        subscribers::create(&mut conn, 1, &old, subscribers::origin::Source::Api).unwrap();
        let csv = "\u{feff}Tags,Email Address,extra,Name\n\
                   vip; early ,Ann@Example.com,x,Ann\n\
                   ,not-an-address,x,\n\
                   ,old@example.com,,\n\
                   \n\
                   ,\"ann@example.com\",,Again\n\
                   ,'=bob@example.com,,'=Bob\n";
        let totals = fresh(&mut conn, csv).unwrap();
        assert_eq!(
            (
                totals.rows,
                totals.created,
                totals.existing,
                totals.error_count
            ),
            (5, 2, 2, 1)
        );
        assert_eq!(
            totals.errors,
            vec![RowError {
                line: 3,
                email: "not-an-address".into(),
                reason: "Email is invalid".into()
            }]
        );
        assert_eq!(
            emails(&conn),
            vec!["=bob@example.com", "ann@example.com", "old@example.com"]
        );
        let ann = subscribers::list(
            &conn,
            1,
            crate::domain::values::pagination::Page::parse(None, None).unwrap(),
            None,
            &subscribers::Filter {
                search: Some("ann@".into()),
                ..Default::default()
            },
        )
        .unwrap()
        .rows
        .remove(0);
        assert_eq!(
            (ann.name.as_deref(), ann.tags),
            (Some("Ann"), vec!["early".to_string(), "vip".to_string()])
        );
        let created_events: i64 = conn
            .query_row(
                "SELECT count(*) FROM events WHERE kind = 'subscriber.created'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(created_events, 3, "one event per created subscriber");
    }

    #[test]
    fn bad_headers_are_refused_with_a_reason() {
        for (csv, expect) in [
            ("", "empty"),
            ("ann@example.com,Ann\n", "holds an address"),
            ("email;name;tags\n", "separated by commas"),
            ("mail,name\n", "no email column (found: mail, name)"),
            ("email,E-mail\n", "two e-mail address columns"),
        ] {
            let message = check_header(csv.as_bytes(), &[]).unwrap_err().to_string();
            assert!(message.contains(expect), "{csv:?}: {message}");
        }
        let mut conn = db();
        assert!(fresh(&mut conn, "name\nx\n").is_err());
        assert!(emails(&conn).is_empty());
    }

    #[test]
    fn status_column_skips_people_who_left_and_errors_are_capped() {
        let mut conn = db();
        let mut csv = String::from(
            "email,status\na@example.com,unsubscribed\nb@example.com,bounced\nc@example.com,active\nd@example.com,maybe\n",
        );
        for i in 0..(ERRORS_KEPT + 5) {
            csv.push_str(&format!("bad{i},\n"));
        }
        let totals = fresh(&mut conn, &csv).unwrap();
        assert_eq!((totals.created, totals.skipped), (1, 2));
        assert_eq!(totals.error_count as usize, ERRORS_KEPT + 6);
        assert_eq!(totals.errors.len(), ERRORS_KEPT);
        assert_eq!(totals.errors[0].line, 5);
        assert!(totals.errors[0].reason.contains("Status"));
        assert_eq!(emails(&conn), vec!["c@example.com"]);
    }

    #[test]
    fn commits_in_batches_and_resumes_without_duplicates() {
        struct Counting(Vec<u64>);
        impl Observer for Counting {
            fn committed(&mut self, totals: &Totals, _bytes: u64) {
                self.0.push(totals.rows);
            }
        }
        let mut conn = db();
        let rows = BATCH_ROWS * 2 + 10;
        let csv: String = std::iter::once("email\n".to_string())
            .chain((0..rows).map(|i| format!("user{i}@example.com\n")))
            .collect();
        let mut seen = Counting(Vec::new());
        let first = import_csv(&mut conn, 1, csv.as_bytes(), Totals::default(), &mut seen).unwrap();
        let batch = BATCH_ROWS as u64;
        assert_eq!(seen.0, vec![batch, 2 * batch, 2 * batch + 10]);
        assert_eq!(first.created as usize, rows);
        // Resuming after the first batch reads on from the batch's last row.
        let resumed = Totals {
            rows: batch,
            created: batch,
            ..Default::default()
        };
        let again = import_csv(&mut conn, 1, csv.as_bytes(), resumed, &mut ()).unwrap();
        assert_eq!(
            (again.rows, again.created, again.existing),
            (2 * batch + 10, batch, batch + 10)
        );
        // Running the whole file again creates nothing.
        let rerun = fresh(&mut conn, &csv).unwrap();
        assert_eq!((rerun.created as usize, rerun.existing as usize), (0, rows));
        assert_eq!(emails(&conn).len(), rows);
    }

    #[test]
    fn export_reads_back_as_the_same_set() {
        let mut conn = db();
        let csv = "email,name,tags\na@example.com,\"Doe, Ann\",x;y\nb@example.com,=SUM(1),\n";
        fresh(&mut conn, csv).unwrap();
        let mut out = Vec::new();
        assert_eq!(export_csv(&conn, 1, &mut out).unwrap(), 2);
        let text = String::from_utf8(out.clone()).unwrap();
        assert!(
            text.starts_with("email,name,tags,status,subscribed_at,unsubscribed_at,created_at,membership,membership_until\n")
        );
        assert!(
            text.contains("a@example.com,\"Doe, Ann\",x;y,active,"),
            "{text}"
        );
        assert!(text.contains("'=SUM(1)"), "formulas are defused: {text}");
        conn.execute(
            "INSERT INTO newsletters (owner_id, name, subdomain, tier, bounce_token, created_at, updated_at)
             VALUES (1, 'M', 'm', 'free', 'bt2', '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z')",
            [],
        )
        .unwrap();
        let totals = import_csv(&mut conn, 2, out.as_slice(), Totals::default(), &mut ()).unwrap();
        assert_eq!(totals.created, 2);
        let mut again = Vec::new();
        export_csv(&conn, 2, &mut again).unwrap();
        let people = |t: &[u8]| -> Vec<String> {
            String::from_utf8_lossy(t)
                .lines()
                .map(|l| l.split(",active,").next().unwrap().to_string())
                .collect()
        };
        assert_eq!(people(&out), people(&again));
    }

    #[test]
    fn preview_shows_columns_and_row_problems() {
        let csv = "email,name,shoe size\nok@example.com,Ok,42\nnope,,\nleft@example.com,,\n";
        let preview = preview(csv.as_bytes(), &[], 2).unwrap();
        let uses: Vec<ColumnUse> = preview.columns.header.iter().map(|(_, u)| *u).collect();
        assert_eq!(
            uses,
            vec![ColumnUse::Email, ColumnUse::Name, ColumnUse::Ignored]
        );
        assert_eq!(preview.rows.len(), 2);
        assert_eq!(preview.rows[0].problem, None);
        assert_eq!(preview.rows[1].line, 3);
        assert_eq!(preview.rows[1].problem.as_deref(), Some("Email is invalid"));
    }

    /// A spreadsheet's export (CRLF line ends, a blank line, a cell over two lines): every
    /// refused row and preview row carries the line an editor shows it on.
    #[test]
    fn lines_are_the_files_own_in_the_import_and_the_preview() {
        let csv = "email,name\r\nok@example.com,Ok\r\nnope,\r\n\r\n\"two\r\nlines\",x\r\nbad,\r\nlast@example.com,\r\n";
        let mut conn = db();
        let totals = fresh(&mut conn, csv).unwrap();
        let lines: Vec<u64> = totals.errors.iter().map(|e| e.line).collect();
        assert_eq!(lines, [3, 5, 7]);
        assert_eq!(totals.created, 2);
        let preview = preview(csv.as_bytes(), &[], 10).unwrap();
        let lines: Vec<u64> = preview.rows.iter().map(|r| r.line).collect();
        assert_eq!(lines, [2, 3, 5, 7, 8]);
    }

    /// A dashboard import stores every refused row (past the first [`ERRORS_KEPT`] that
    /// `Totals` reports), and the download pages through them in the file's order.
    #[test]
    fn refused_rows_are_stored_and_written_as_csv_page_by_page() {
        let dir = tempfile::tempdir().unwrap();
        let mut conn = crate::store::open(&dir.path().join("broadsheet.db")).unwrap();
        crate::store::migrate(&mut conn).unwrap();
        conn.execute_batch(
            "INSERT INTO users (email, password_hash, created_at, updated_at) VALUES ('o@x.co', 'h', '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z');
             INSERT INTO newsletters (owner_id, name, subdomain, tier, bounce_token, created_at, updated_at)
             VALUES (1, 'N', 'n', 'free', 'bt', '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z');",
        )
        .unwrap();
        let refused = REFUSED_PAGE as usize * 2 + 500;
        let mut csv = String::from("email\nfirst@example.com\n=sum(a1)\n");
        for i in 0..refused - 1 {
            csv.push_str(&format!("bad{i}\n"));
        }
        let stored = new_stored_name();
        std::fs::write(uploads_dir(&conn).unwrap().join(&stored), &csv).unwrap();
        let upload = record_upload(&mut conn, 1, "list.csv", &stored).unwrap();
        start_upload(&mut conn, 1, upload.id).unwrap();
        let done = run_upload(&mut conn, upload.id, &|| true).unwrap().unwrap();
        assert_eq!(done.totals.error_count as usize, refused);
        let page = upload_errors(&conn, upload.id, 0, ERRORS_KEPT as u64).unwrap();
        assert_eq!(page.len(), ERRORS_KEPT);
        assert_eq!(page.last().unwrap().line, ERRORS_KEPT as u64 + 2);
        assert_eq!(
            upload_errors(&conn, upload.id, refused as u64, 10)
                .unwrap()
                .len(),
            2
        );

        let mut out = Vec::new();
        assert_eq!(
            refused_csv(&conn, upload.id, &mut out).unwrap(),
            refused as u64
        );
        let text = String::from_utf8(out).unwrap();
        let mut rows = text.lines();
        assert_eq!(rows.next(), Some("line,email,reason"));
        assert_eq!(rows.next(), Some("3,'=sum(a1),Email is invalid"));
        let lines: Vec<u64> = rows
            .map(|r| r.split(',').next().unwrap().parse().unwrap())
            .collect();
        assert_eq!(lines, (4..refused as u64 + 3).collect::<Vec<_>>());
        // Another import's rows are not in it.
        let mut none = Vec::new();
        assert_eq!(refused_csv(&conn, upload.id + 1, &mut none).unwrap(), 0);
        assert_eq!(String::from_utf8(none).unwrap(), "line,email,reason\n");
    }

    #[test]
    fn a_cancelled_newsletter_takes_no_import() {
        let mut conn = db();
        conn.execute("UPDATE newsletters SET status = 'cancelled'", [])
            .unwrap();
        let e = fresh(&mut conn, "email\na@example.com\n").unwrap_err();
        assert!(matches!(
            e,
            DomainError::Rejected(ErrorCode::NewsletterCancelled, _)
        ));
    }

    #[test]
    fn uploads_run_as_jobs_resume_and_clean_up() {
        let dir = tempfile::tempdir().unwrap();
        let mut conn = crate::store::open(&dir.path().join("broadsheet.db")).unwrap();
        crate::store::migrate(&mut conn).unwrap();
        conn.execute_batch(
            "INSERT INTO users (email, password_hash, created_at, updated_at) VALUES ('o@x.co', 'h', '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z');
             INSERT INTO newsletters (owner_id, name, subdomain, tier, bounce_token, created_at, updated_at)
             VALUES (1, 'N', 'n', 'free', 'bt', '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z');",
        )
        .unwrap();
        let imports = uploads_dir(&conn).unwrap();
        assert_eq!(imports, dir.path().join("imports"));

        let bad = new_stored_name();
        std::fs::write(imports.join(&bad), "name\nx\n").unwrap();
        assert!(record_upload(&mut conn, 1, "bad.csv", &bad).is_err());
        assert!(!imports.join(&bad).exists(), "a refused file is removed");

        let stored = new_stored_name();
        std::fs::write(
            imports.join(&stored),
            "email\na@example.com\nbad\nb@example.com\n",
        )
        .unwrap();
        let upload = record_upload(&mut conn, 1, "list.csv", &stored).unwrap();
        assert_eq!(upload.state, UploadState::Uploaded);
        assert!(matches!(
            get_upload(&conn, 2, upload.id),
            Err(DomainError::NotFound(_))
        ));
        let started = start_upload(&mut conn, 1, upload.id).unwrap();
        assert_eq!(started.state, UploadState::Queued);
        assert!(
            start_upload(&mut conn, 1, upload.id).is_err(),
            "started once"
        );
        let jobs: i64 = conn
            .query_row(
                "SELECT count(*) FROM jobs WHERE kind = 'import_subscribers'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(jobs, 1);

        // A stop after the first batch: nothing finished, the import resumes later.
        assert!(
            run_upload(&mut conn, upload.id, &|| false)
                .unwrap()
                .is_none()
        );
        assert_eq!(
            get_upload(&conn, 1, upload.id).unwrap().state,
            UploadState::Running
        );
        let done = run_upload(&mut conn, upload.id, &|| true).unwrap().unwrap();
        assert_eq!(done.state, UploadState::Done);
        assert_eq!(
            (
                done.totals.rows,
                done.totals.created,
                done.totals.error_count
            ),
            (3, 2, 1)
        );
        assert_eq!(done.bytes_done, done.size_bytes);
        let errors = upload_errors(&conn, upload.id, 0, 10).unwrap();
        assert_eq!((errors[0].line, errors[0].email.as_str()), (3, "bad"));
        assert!(
            !imports.join(&stored).exists(),
            "the file goes once imported"
        );
        assert_eq!(
            run_upload(&mut conn, upload.id, &|| true)
                .unwrap()
                .unwrap()
                .state,
            UploadState::Done
        );

        let other = new_stored_name();
        std::fs::write(imports.join(&other), "email\nc@example.com\n").unwrap();
        let waiting = record_upload(&mut conn, 1, "later.csv", &other).unwrap();
        conn.execute(
            "UPDATE subscriber_imports SET created_at = '2000-01-01T00:00:00.000Z' WHERE id = ?1",
            [waiting.id],
        )
        .unwrap();
        assert_eq!(purge_stale_uploads(&mut conn).unwrap(), 1);
        assert!(!imports.join(&other).exists());
        assert_eq!(recent_uploads(&conn, 1, 10).unwrap().len(), 1);
    }

    #[test]
    fn sizes_are_shown_in_mib_to_a_tenth_and_whole_ones_without_decimals() {
        const MIB: u64 = 1024 * 1024;
        assert_eq!(mib(50 * MIB), "50 MiB");
        assert_eq!(mib(95 * MIB + 300 * 1024), "95.3 MiB");
        assert_eq!(mib(60 * MIB + 20), "60 MiB");
        assert_eq!(mib(MIB / 2), "0.5 MiB");
    }

    #[test]
    fn an_owner_keeps_at_most_three_uploads_and_100_mib_on_disk() {
        let dir = tempfile::tempdir().unwrap();
        let mut conn = crate::store::open(&dir.path().join("broadsheet.db")).unwrap();
        crate::store::migrate(&mut conn).unwrap();
        conn.execute_batch(
            "INSERT INTO users (email, password_hash, created_at, updated_at) VALUES ('o@x.co', 'h', '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z');
             INSERT INTO users (email, password_hash, created_at, updated_at) VALUES ('p@x.co', 'h', '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z');
             INSERT INTO newsletters (owner_id, name, subdomain, tier, bounce_token, created_at, updated_at)
             VALUES (1, 'N', 'n', 'free', 'bt', '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z'), (1, 'M', 'm', 'free', 'bt2', '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z'),
                    (2, 'P', 'p', 'free', 'bt3', '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z');",
        )
        .unwrap();
        let imports = uploads_dir(&conn).unwrap();
        let store = |conn: &mut Connection, newsletter: i64| {
            let name = new_stored_name();
            std::fs::write(imports.join(&name), "email\na@example.com\n").unwrap();
            (record_upload(conn, newsletter, "list.csv", &name), name)
        };
        // Three across the owner's two newsletters; the fourth is refused and removed.
        for newsletter in [1, 2, 1] {
            store(&mut conn, newsletter).0.unwrap();
        }
        let (refused, name) = store(&mut conn, 2);
        assert!(matches!(
            refused,
            Err(DomainError::Invalid(ErrorCode::LimitReached, _))
        ));
        assert!(!imports.join(&name).exists());
        // Another owner has room of their own; a finished import frees its place.
        store(&mut conn, 3).0.unwrap();
        conn.execute(
            "UPDATE subscriber_imports SET state = 'done' WHERE id = 1",
            [],
        )
        .unwrap();
        let room = upload_room(&conn, 2).unwrap();
        assert_eq!(room.files_held, 2);
        assert!(room.check(room.bytes_left()).is_ok());
        // Bytes: what is held counts against the total.
        conn.execute(
            "UPDATE subscriber_imports SET size_bytes = 60 * 1024 * 1024 WHERE id = 2",
            [],
        )
        .unwrap();
        let room = upload_room(&conn, 1).unwrap();
        assert_eq!(
            room.bytes_left(),
            OWNER_UPLOAD_BYTES - 60 * 1024 * 1024 - 20
        );
        let too_big = room.check(room.bytes_left() + 1).unwrap_err().to_string();
        assert!(too_big.contains("already hold 60 MiB"), "{too_big}");
        assert!(too_big.contains("at most 100 MiB"), "{too_big}");
    }
}
