//! Ids are never handed out twice (migration 0021): once the newest row of a
//! table whose ids leave the service is deleted, the next row made there gets a larger id, in
//! any newsletter; and a database made before 0021 is rebuilt in place, every row, column,
//! index and trigger kept.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use crate::support::*;

/// The tables whose ids leave the service (URLs, API answers, webhook payloads, mail links).
/// (A sequence's enrollments and sends are named by job payloads: a queued job must never
/// find another reader's row under its id.)
const TABLES: [&str; 16] = [
    "newsletters",
    "api_keys",
    "issues",
    "articles",
    "subscribers",
    "deliveries",
    "webhook_subscriptions",
    "webhook_deliveries",
    "custom_domains",
    "subscriber_imports",
    "signup_forms",
    "custom_fields",
    "sequences",
    "sequence_steps",
    "sequence_enrollments",
    "sequence_sends",
];

/// Tables whose ids stay inside the service (or that are never deleted from and show no id):
/// they may keep SQLite's plain rowid ids.
const INTERNAL_IDS: [&str; 9] = [
    "issue_links",
    "users",
    "user_tokens",
    "sessions",
    "jobs",
    "events",
    "subscription_requests",
    "sender_domains",
    "dkim_keys",
];

/// A new table with an `id` says here which kind it is: ids that leave the service are
/// AUTOINCREMENT (the test below), the others are listed in [`INTERNAL_IDS`].
#[test]
fn every_table_with_an_id_is_one_kind_or_the_other() {
    let dir = tempfile::tempdir().unwrap();
    let (code, out, err) = run_cli(dir.path(), &["migrate"]);
    assert_eq!(code, 0, "{out}{err}");
    let conn = rusqlite::Connection::open(dir.path().join("broadsheet.db")).unwrap();
    let with_ids: Vec<(String, String)> = conn
        .prepare(
            "SELECT s.name, s.sql FROM sqlite_schema s WHERE s.type = 'table'
             AND EXISTS (SELECT 1 FROM pragma_table_info(s.name) c WHERE c.name = 'id' AND c.pk = 1)
             ORDER BY s.name",
        )
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    for (table, sql) in &with_ids {
        let autoincrement = sql.contains("INTEGER PRIMARY KEY AUTOINCREMENT");
        assert_eq!(
            autoincrement,
            TABLES.contains(&table.as_str()),
            "{table}: AUTOINCREMENT exactly when its ids leave the service"
        );
        assert!(
            autoincrement || INTERNAL_IDS.contains(&table.as_str()),
            "{table}: do its ids leave the service (AUTOINCREMENT, TABLES) or not (INTERNAL_IDS)?"
        );
    }
    assert_eq!(with_ids.len(), TABLES.len() + INTERNAL_IDS.len());
}

/// The `id` of a 201 answer.
#[track_caller]
fn created_id(resp: &Resp) -> i64 {
    resp.expect(201);
    resp.json()["id"].as_i64().expect("id")
}

/// A writable connection to the app's database, foreign keys on as the server has them.
fn writer(data_dir: &Path) -> rusqlite::Connection {
    let conn = rusqlite::Connection::open(data_dir.join("broadsheet.db")).unwrap();
    conn.busy_timeout(Duration::from_secs(10)).unwrap();
    conn.pragma_update(None, "foreign_keys", true).unwrap();
    conn
}

/// Deletes the newest row of `table` straight in the database, for rows the service itself
/// never deletes (a key is revoked, not deleted; a newsletter and a sent message stay):
/// whatever deletes one later, its id stays spent. Returns the deleted id.
fn delete_newest(app: &App, table: &str) -> i64 {
    let conn = writer(app.data_dir());
    let sql = format!("DELETE FROM {table} WHERE id = (SELECT max(id) FROM {table}) RETURNING id");
    conn.query_row(&sql, [], |r| r.get(0)).unwrap()
}

fn max_id(app: &App, table: &str) -> i64 {
    app.count(&format!("SELECT coalesce(max(id), 0) FROM {table}"))
}

#[test]
fn api_resources_get_ids_above_every_deleted_one() {
    let app = spawn_app_with(&["--allow-private-webhooks"]);
    let a = onboard(&app, "Ids Alpha");
    let b = onboard(&app, "Ids Beta");
    let subscriber = |owner: &Owner| {
        created_id(&owner.post("/subscribers", &json!({"email": unique_email("reader")})))
    };

    // Subscribers: the newest deleted, the next in either newsletter is above it.
    let s1 = subscriber(&a);
    let s2 = subscriber(&a);
    a.delete(&format!("/subscribers/{s2}")).expect(204);
    let s3 = subscriber(&a);
    let s4 = subscriber(&b);
    assert!(s1 < s2 && s2 < s3 && s3 < s4, "{s1} {s2} {s3} {s4}");

    // Issues: a draft deleted in one newsletter, the next made in another.
    let issue = |owner: &Owner, subject: &str| {
        created_id(&owner.post("/issues", &json!({"issue": {"subject": subject}})))
    };
    let i1 = issue(&a, "First");
    let i2 = issue(&a, "Second");
    a.delete(&format!("/issues/{i2}")).expect(204);
    let i3 = issue(&b, "Third");
    assert!(i1 < i2 && i2 < i3, "{i1} {i2} {i3}");

    // Articles: saving an issue's articles writes them anew, above the ones it replaced.
    let article =
        |n: i64| json!({"title": format!("Article {n}"), "url": format!("https://a.example/{n}")});
    let with_two = a.post(
        "/issues",
        &json!({"issue": {"subject": "Articles", "articles": [article(1), article(2)]}}),
    );
    let iid = created_id(&with_two);
    let before: Vec<i64> = a.get(&format!("/issues/{iid}")).json()["articles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["id"].as_i64().unwrap())
        .collect();
    assert_eq!(before.len(), 2);
    a.patch(
        &format!("/issues/{iid}"),
        &json!({"issue": {"articles": [article(3)]}}),
    )
    .expect(200);
    let after = a.get(&format!("/issues/{iid}")).json()["articles"][0]["id"]
        .as_i64()
        .unwrap();
    assert!(after > before[1], "{before:?} then {after}");

    // Webhook subscriptions, and their deliveries: the newest subscription deleted takes the
    // newest delivery with it; the next of each is above.
    let hook = |owner: &Owner| {
        created_id(&owner.post(
            "/webhook_subscriptions",
            &json!({"url": "http://127.0.0.1:9/", "events": ["subscriber.created"]}),
        ))
    };
    let w1 = hook(&a);
    let w2 = hook(&a);
    subscriber(&a);
    let d2 = app.count(&format!(
        "SELECT max(id) FROM webhook_deliveries WHERE subscription_id = {w2}"
    ));
    assert_eq!(d2, max_id(&app, "webhook_deliveries"));
    a.delete(&format!("/webhook_subscriptions/{w2}"))
        .expect(204);
    let w3 = hook(&b);
    assert!(w1 < w2 && w2 < w3, "{w1} {w2} {w3}");
    assert!(max_id(&app, "webhook_deliveries") < d2, "the newest went");
    subscriber(&b);
    let d3 = app.count(&format!(
        "SELECT max(id) FROM webhook_deliveries WHERE subscription_id = {w3}"
    ));
    assert!(d3 > d2, "{d2} then {d3}");
}

#[test]
fn dashboard_resources_get_ids_above_every_deleted_one() {
    let app = spawn_app();
    let a = onboard(&app, "Ids Gamma");
    let b = onboard(&app, "Ids Delta");

    // API keys are revoked, never deleted by the service: their ids stay spent anyway.
    create_api_key(&a.client, a.newsletter_id, &["read"]);
    let k2 = delete_newest(&app, "api_keys");
    create_api_key(&b.client, b.newsletter_id, &["read"]);
    assert!(max_id(&app, "api_keys") > k2);

    // Newsletters, likewise.
    let n1 = create_newsletter(&a.client, "Ids Epsilon");
    assert_eq!(delete_newest(&app, "newsletters"), n1);
    let n2 = create_newsletter(&b.client, "Ids Zeta");
    assert!(n2 > n1, "{n1} then {n2}");

    // Custom domains: one per newsletter, removed from the dashboard.
    let domain = |owner: &Owner, name: &str| -> (String, i64) {
        let base = format!("/newsletters/{}/custom_domains", owner.newsletter_id);
        let page = owner
            .client
            .submit(
                &format!("{base}/choose_method"),
                &base,
                &[
                    ("custom_domain[domain]", name),
                    ("custom_domain[method]", "subdomain"),
                ],
            )
            .redirect();
        let id = page.rsplit('/').next().unwrap().parse().expect(&page);
        (page, id)
    };
    let (_, c1) = domain(&a, "news.gamma.example.com");
    let (page, c2) = domain(&b, "news.delta.example.com");
    owner_removes_domain(&b, &page);
    let (_, c3) = domain(&b, "letters.delta.example.com");
    assert!(c1 < c2 && c2 < c3, "{c1} {c2} {c3}");

    // Imports: an upload discarded, the next one above it.
    let import = |owner: &Owner| -> (String, i64) {
        let page = upload(owner, "list.csv", b"email\nann@example.com\n").redirect();
        let id = page.rsplit('/').next().unwrap().parse().expect(&page);
        (page, id)
    };
    let (_, u1) = import(&a);
    let (page, u2) = import(&b);
    let discarded = b.client.submit(&page, &page, &[("_method", "delete")]);
    assert!(discarded.redirect().ends_with("/subscribers/import"));
    let (_, u3) = import(&b);
    assert!(u1 < u2 && u2 < u3, "{u1} {u2} {u3}");
}

fn owner_removes_domain(owner: &Owner, page: &str) {
    let confirm = format!("{page}/remove");
    let removed = owner
        .client
        .submit(&confirm, page, &[("_method", "delete")]);
    assert_eq!(
        removed.redirect(),
        format!("/newsletters/{}/custom_domains", owner.newsletter_id)
    );
}

/// A delivery's id is in its message's links (unsubscribe, open, click) and return path.
#[test]
fn deliveries_get_ids_above_every_deleted_one() {
    let app = spawn_app();
    let owner = onboard_paid(&app, "Ids Eta");
    for _ in 0..2 {
        created_id(&owner.post("/subscribers", &json!({"email": unique_email("reader")})));
    }
    let send = |subject: &str| {
        let id = created_id(&owner.post(
            "/issues",
            &json!({"issue": {"subject": subject, "status": "approved", "content_markdown": "News."}}),
        ));
        owner
            .post(&format!("/issues/{id}/send_now"), &json!({}))
            .expect(200);
        wait_for(&format!("issue {id} sent"), Duration::from_secs(30), || {
            (owner.get(&format!("/issues/{id}")).json()["status"] == "sent").then_some(())
        });
        id
    };
    send("One");
    let deleted = delete_newest(&app, "deliveries");
    let second = send("Two");
    assert!(
        app.count(&format!(
            "SELECT min(id) FROM deliveries WHERE issue_id = {second}"
        )) > deleted
    );
}

/// Rows of every table as text, sorted (the copy keeps the rows, not their order on disk);
/// `schema_migrations` gains a row of its own.
fn rows(conn: &rusqlite::Connection) -> BTreeMap<String, Vec<String>> {
    let tables: Vec<String> = conn
        .prepare(
            "SELECT name FROM sqlite_schema WHERE type = 'table'
             AND name NOT IN ('sqlite_sequence', 'schema_migrations')",
        )
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    tables
        .into_iter()
        .map(|table| {
            let mut stmt = conn.prepare(&format!("SELECT * FROM \"{table}\"")).unwrap();
            let width = stmt.column_count();
            let mut all: Vec<String> = stmt
                .query_map([], |r| {
                    (0..width)
                        .map(|i| r.get_ref(i).map(|v| format!("{v:?}")))
                        .collect::<Result<Vec<_>, _>>()
                        .map(|v| v.join(" | "))
                })
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap();
            all.sort();
            (table, all)
        })
        .collect()
}

/// Every table, index and trigger, its SQL without comments, quotes, AUTOINCREMENT and
/// layout: what a rebuild must keep.
fn schema(conn: &rusqlite::Connection) -> BTreeMap<String, String> {
    let strip_comments = |sql: &str| -> String {
        sql.lines()
            .map(|line| line.split("--").next().unwrap())
            .collect::<Vec<_>>()
            .join(" ")
    };
    conn.prepare(
        "SELECT type || ' ' || name || ' on ' || tbl_name, coalesce(sql, '') FROM sqlite_schema
         WHERE name != 'sqlite_sequence'",
    )
    .unwrap()
    .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))
    .unwrap()
    .map(|row| {
        let (what, sql) = row.unwrap();
        let text = strip_comments(&sql)
            .replace('"', "")
            .replace("AUTOINCREMENT", "");
        let mut spaced = text.split_whitespace().collect::<Vec<_>>().join(" ");
        for mark in ["(", ")", ","] {
            spaced = spaced
                .replace(&format!(" {mark}"), mark)
                .replace(&format!("{mark} "), mark);
        }
        (what, spaced)
    })
    .collect()
}

/// The database as migration 0020 left it, with rows in every rebuilt table and gaps in their
/// ids, and an API key `key` for newsletter 3.
fn database_at_0020(path: &Path, key: &str) {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.execute_batch(
        "CREATE TABLE schema_migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)",
    )
    .unwrap();
    let last = broadsheet::store::MIGRATIONS
        .iter()
        .position(|(name, _)| *name == "0020_site_theme")
        .unwrap();
    for (name, sql) in &broadsheet::store::MIGRATIONS[..=last] {
        conn.execute_batch(sql).unwrap();
        conn.execute(
            "INSERT INTO schema_migrations VALUES (?1, '2026-01-01T00:00:00.000Z')",
            [name],
        )
        .unwrap();
    }
    conn.pragma_update(None, "foreign_keys", true).unwrap();
    conn.execute_batch(
        "INSERT INTO users (id, email, password_hash, created_at, updated_at)
             VALUES (2, 'old@example.com', 'h', '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z');
         INSERT INTO newsletters (id, owner_id, name, subdomain, tier, bounce_token, live_at, accent_color, created_at, updated_at)
             VALUES (3, 2, 'Old News', 'old-news', 'paid', 'bt', '2026-01-01T00:00:00.000Z', '#112233', '2026-01-01T00:00:00.000Z', '2026-01-02T00:00:00.000Z');
         INSERT INTO subscribers (id, newsletter_id, email, name, status, unsubscribed_at, created_at, changed_at, welcomed_at) VALUES
             (5, 3, 'a@example.com', 'A', 'active', NULL, '2026-01-01T00:00:00.000Z', NULL, '2026-01-01T00:01:00.000Z'),
             (9, 3, 'b@example.com', NULL, 'unsubscribed', '2026-01-03T00:00:00.000Z', '2026-01-01T00:00:00.000Z', '2026-01-03T00:00:00.000Z', NULL),
             (12, 3, 'c@example.com', NULL, 'active', NULL, '2026-01-02T00:00:00.000Z', NULL, NULL);
         INSERT INTO subscriber_tags (subscriber_id, tag) VALUES (5, 'vip'), (9, 'vip'), (12, 'early');
         INSERT INTO issues (id, newsletter_id, subject, status, path, sent_at, content_html, created_at, updated_at) VALUES
             (4, 3, 'Sent', 'sent', 'sent', '2026-01-04T00:00:00.000Z', '<p>x</p>', '2026-01-04T00:00:00.000Z', '2026-01-04T00:00:00.000Z'),
             (7, 3, 'Draft', 'draft', 'draft', NULL, NULL, '2026-01-05T00:00:00.000Z', '2026-01-05T00:00:00.000Z');
         INSERT INTO articles (id, issue_id, position, title, url) VALUES (6, 4, 1, 'A', 'https://a.example/'), (8, 7, 1, 'B', 'https://b.example/');
         INSERT INTO issue_audience_tags (issue_id, excluded, tag) VALUES (7, 0, 'vip');
         INSERT INTO deliveries (id, issue_id, subscriber_id, email, status, sent_at, opened_at, soft_bounced_at, created_at) VALUES
             (10, 4, 5, 'a@example.com', 'sent', '2026-01-04T00:00:00.000Z', '2026-01-04T01:00:00.000Z', NULL, '2026-01-04T00:00:00.000Z'),
             (11, 4, 9, 'b@example.com', 'unconfirmed', '2026-01-04T00:00:00.000Z', NULL, '2026-01-04T02:00:00.000Z', '2026-01-04T00:00:00.000Z');
         INSERT INTO webhook_subscriptions (id, newsletter_id, url, events, secret, created_at, updated_at)
             VALUES (2, 3, 'https://hooks.example.com/', '[\"subscriber.deleted\"]', 'whsec_x', '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z');
         -- Subscriber 40 was deleted before the upgrade: its event still names it.
         INSERT INTO events (id, newsletter_id, kind, payload, created_at)
             VALUES (1, 3, 'subscriber.deleted', '{\"data\": {\"subscription_id\": 40}}', '2026-01-06T00:00:00.000Z');
         INSERT INTO webhook_deliveries (id, subscription_id, event_id, uid, event, body, state, created_at, updated_at)
             VALUES (15, 2, 1, 'msg_old', 'subscriber.deleted', '{}', 'delivered', '2026-01-06T00:00:00.000Z', '2026-01-06T00:00:00.000Z');
         INSERT INTO custom_domains (id, newsletter_id, domain, method, status, verification_token, created_at, updated_at)
             VALUES (3, 3, 'www.old.example', 'subdomain', 'active', 'tok', '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z');
         INSERT INTO subscriber_imports (id, newsletter_id, file_name, stored_name, size_bytes, state, rows_done, created_at, updated_at, finished_at)
             VALUES (6, 3, 'old.csv', 'old-stored', 10, 'done', 1, '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z');
         INSERT INTO subscriber_import_errors (import_id, line, email, reason) VALUES (6, 2, 'bad', 'not an address');",
    )
    .unwrap();
    conn.execute(
        "INSERT INTO api_keys (id, newsletter_id, name, prefix, key_hash, can_read, can_write, can_delete, created_at)
         VALUES (13, 3, 'old key', ?1, ?2, 1, 1, 1, '2026-01-01T00:00:00.000Z')",
        (&key[..8], broadsheet::domain::values::secrets::sha256_hex(key)),
    )
    .unwrap();
}

#[test]
fn an_upgraded_database_keeps_every_row_and_hands_out_ids_above_the_old_ones() {
    let mut app = spawn_app();
    app.stop();
    let db = app.data_dir().join("broadsheet.db");
    for file in ["broadsheet.db", "broadsheet.db-wal", "broadsheet.db-shm"] {
        let _ = std::fs::remove_file(app.data_dir().join(file));
    }
    let key = format!("oldkey01{}", "ab".repeat(32));
    database_at_0020(&db, &key);
    let (old_rows, old_schema, old_last_job) = {
        let conn = rusqlite::Connection::open(&db).unwrap();
        let last_job: i64 = conn
            .query_row("SELECT coalesce(max(id), 0) FROM jobs", [], |r| r.get(0))
            .unwrap();
        (rows(&conn), schema(&conn), last_job)
    };

    let (code, out, err) = app.cli(&["migrate"]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(
        out.trim(),
        "applied 0021_ids_never_reused\napplied 0022_events_by_subscriber\n\
         applied 0023_resend_unconfirmed\napplied 0024_connection_cut_offs\n\
         applied 0025_newsletter_relays\napplied 0026_send_usage\n\
         applied 0027_media\napplied 0028_issue_edits\napplied 0029_link_reports\n\
         applied 0030_mail_details\napplied 0031_account_changes\napplied 0032_site_pages\napplied 0033_memberships\n\
         applied 0034_membership_lapses\napplied 0035_signup_forms\napplied 0036_sources\napplied 0037_custom_fields\n\
         applied 0038_field_segments\napplied 0039_form_fields\napplied 0040_preferences\n\
         applied 0041_resend_unopened\napplied 0042_feeds\napplied 0043_feed_modes\napplied 0044_sequences\n\
         applied 0045_sequence_welcome_and_opens"
    );

    let conn = rusqlite::Connection::open(&db).unwrap();
    {
        // Compared on a copy without what 0022 adds (each event's subscriber and its index,
        // tested in store::migrations), 0023 (each delivery's `resent_at` and each issue's
        // `resending_since`, NULL in every row), 0024 (each delivery's `cut_offs`, 0), 0025
        // (the empty `newsletter_relays`, each newsletter's warm-up columns, NULL) and 0026
        // (the empty `send_usage`), 0027 (the empty `media` and `issue_media`), 0028 (each
        // issue's edit columns, NULL), 0029 (the report counters, the tags' active counts and
        // the tag triggers it redefines, which the counter recounts test), 0030 (each
        // newsletter's reply-to and postal address, NULL) and 0031 (each account's
        // `own_time_zone`, 0; the tokens' `new_email` and the CHECK of their purposes, which
        // takes `change_email` too) and 0032 (each newsletter's about page and author and
        // each issue's excerpt and social image, NULL; the `render_content` job it queues to
        // fill the excerpts) and 0033 (the empty membership tables; each issue's visibility,
        // `public`, and `paid_members_only`, 0; each delivery's `teaser`, 0) and 0035 (the
        // empty form tables; each subscription request's `tags`, `[]`, and `form_id`, NULL)
        // and 0036 (each subscriber's and request's source, referrer and campaign, NULL)
        // and 0037 (the empty custom field tables) and 0038 (the empty field conditions of
        // audiences, and each field's `deleted_at`) and 0039 (each form's and request's
        // `fields` and `field_values`, `[]`) and 0040 (the empty pauses and topics) and 0041
        // (each delivery's `opened_auto`, 0, and each issue's resend links, NULL) and 0042
        // (the empty feed tables) and 0043 (their modes) and 0044 (the empty sequence tables and
        // their triggers) and 0045 (a welcome sequence for each newsletter, in those tables,
        // and the trigger that makes one for each new newsletter):
        // the rest is as 0020 left it.
        let copy = app.data_dir().join("before-0022.db");
        conn.execute("VACUUM INTO ?1", [copy.to_str().unwrap()])
            .unwrap();
        let copy = rusqlite::Connection::open(&copy).unwrap();
        copy.execute_batch(
            "DROP INDEX events_subscriber; ALTER TABLE events DROP COLUMN subscriber_id;
             ALTER TABLE deliveries DROP COLUMN resent_at;
             ALTER TABLE issues DROP COLUMN resending_since;
             ALTER TABLE deliveries DROP COLUMN cut_offs; DROP TABLE send_usage;
             DROP TABLE issue_media; DROP TABLE media;
             DROP TABLE newsletter_relays; ALTER TABLE newsletters DROP COLUMN warmup_first_day_cap;
             ALTER TABLE newsletters DROP COLUMN warmup_factor;
             ALTER TABLE newsletters DROP COLUMN warmup_started_on;
             DROP TABLE issue_days; DROP TABLE link_clickers; DROP TABLE issue_links;
             DROP TRIGGER subscriber_tags_counted; DROP TRIGGER subscriber_tags_uncounted;
             DROP TRIGGER subscriber_tags_moved; DROP TRIGGER subscribers_tags_active_counted;
             ALTER TABLE tag_counts DROP COLUMN active;
             ALTER TABLE issues DROP COLUMN edited_at; ALTER TABLE issues DROP COLUMN mailed_markdown;
             ALTER TABLE issues DROP COLUMN mailed_html;
             ALTER TABLE issues DROP COLUMN withdrawn_published_at;
             ALTER TABLE issues DROP COLUMN publish_when_sent;
             ALTER TABLE newsletters DROP COLUMN reply_to;
             ALTER TABLE newsletters DROP COLUMN postal_address;
             ALTER TABLE users DROP COLUMN own_time_zone;
             ALTER TABLE user_tokens DROP COLUMN new_email;
             ALTER TABLE newsletters DROP COLUMN about_markdown;
             ALTER TABLE newsletters DROP COLUMN about_html;
             ALTER TABLE newsletters DROP COLUMN author_name;
             ALTER TABLE newsletters DROP COLUMN author_image;
             ALTER TABLE issues DROP COLUMN excerpt;
             ALTER TABLE issues DROP COLUMN social_image_url;
             DROP TABLE membership_plans; DROP TABLE stripe_connections; DROP TABLE stripe_events;
             DROP TABLE memberships; DROP TABLE reader_links; DROP TABLE reader_sessions;
             ALTER TABLE issues DROP COLUMN visibility;
             ALTER TABLE issues DROP COLUMN paid_members_only;
             ALTER TABLE deliveries DROP COLUMN teaser;
             ALTER TABLE signup_forms DROP COLUMN fields;
             ALTER TABLE subscription_requests DROP COLUMN form_id;
             ALTER TABLE subscription_requests DROP COLUMN tags;
             DROP TABLE used_challenges; DROP TABLE signup_forms;
             DROP TRIGGER subscribers_source_counted; DROP TRIGGER subscribers_source_moved;
             DROP TRIGGER subscribers_source_uncounted; DROP TABLE newsletter_source_days;
             ALTER TABLE subscribers DROP COLUMN source; ALTER TABLE subscribers DROP COLUMN referrer;
             ALTER TABLE subscribers DROP COLUMN utm_source; ALTER TABLE subscribers DROP COLUMN utm_medium;
             ALTER TABLE subscribers DROP COLUMN utm_campaign;
             ALTER TABLE subscription_requests DROP COLUMN referrer;
             ALTER TABLE subscription_requests DROP COLUMN utm_source;
             ALTER TABLE subscription_requests DROP COLUMN utm_medium;
             ALTER TABLE subscription_requests DROP COLUMN utm_campaign;
             DROP TABLE issue_audience_fields;
             ALTER TABLE subscription_requests DROP COLUMN field_values;
             DROP TABLE subscriber_pauses; DROP TABLE newsletter_topics;
             DROP TABLE feed_items; DROP TABLE newsletter_feeds;
             DROP TABLE sequence_sends; DROP TABLE sequence_step_counts; DROP TABLE sequence_counts;
             DROP TABLE sequence_enrollments; DROP TABLE sequence_steps; DROP TABLE sequences;
             DROP TRIGGER newsletters_have_a_welcome_sequence;
             DROP TRIGGER sequences_entered_by_tag; DROP TRIGGER sequences_left_by_tag;
             DROP TRIGGER sequences_left_by_leaving;
             DROP TRIGGER deliveries_auto_opened; DROP TRIGGER deliveries_auto_opened_counted;
             ALTER TABLE deliveries DROP COLUMN opened_auto; ALTER TABLE issue_counts DROP COLUMN auto_opened;
             ALTER TABLE issues DROP COLUMN resent_unopened_as; ALTER TABLE issues DROP COLUMN resend_of;
             DROP TABLE subscriber_field_values; DROP TABLE custom_fields;",
        )
        .unwrap();
        let queued = copy
            .execute(
                "DELETE FROM jobs WHERE id > ?1 AND kind = 'render_content'",
                [old_last_job],
            )
            .unwrap();
        assert_eq!(queued, 1, "0032 queues one job to fill the excerpts");
        assert_eq!(rows(&copy), old_rows, "every row and column kept");
        let redefined = |mut schema: BTreeMap<String, String>| {
            for name in [
                "subscriber_tags_counted",
                "subscriber_tags_uncounted",
                "subscriber_tags_moved",
            ] {
                schema.remove(&format!("trigger {name} on subscriber_tags"));
            }
            // 0031 widens the CHECK of the tokens' purposes.
            if let Some(sql) = schema.get_mut("table user_tokens on user_tokens") {
                *sql = sql.replace("'reset_password'", "'reset_password','change_email'");
            }
            schema
        };
        assert_eq!(
            schema(&copy),
            redefined(old_schema),
            "the same schema but AUTOINCREMENT"
        );
    }
    for table in TABLES {
        let sql: String = conn
            .query_row(
                "SELECT sql FROM sqlite_schema WHERE type = 'table' AND name = ?1",
                [table],
                |r| r.get(0),
            )
            .unwrap();
        assert!(
            sql.contains("INTEGER PRIMARY KEY AUTOINCREMENT"),
            "{table}: {sql}"
        );
    }
    let integrity: String = conn
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(integrity, "ok");
    let broken: i64 = conn
        .query_row("SELECT count(*) FROM pragma_foreign_key_check", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(broken, 0);
    let sequences: BTreeMap<String, i64> = conn
        .prepare("SELECT name, seq FROM sqlite_sequence")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let expected: BTreeMap<String, i64> = [
        ("newsletters", 3),
        ("api_keys", 13),
        ("issues", 7),
        ("articles", 8),
        // Above subscriber 40, deleted before the upgrade and named by an event.
        ("subscribers", 40),
        ("deliveries", 11),
        ("webhook_subscriptions", 2),
        ("webhook_deliveries", 15),
        ("custom_domains", 3),
        ("subscriber_imports", 6),
        // The welcome sequence 0045 makes for each newsletter the database holds.
        ("sequences", 1),
    ]
    .into_iter()
    .map(|(t, n)| (t.to_string(), n))
    .collect();
    assert_eq!(sequences, expected);
    drop(conn);

    // The server on the upgraded database: the old key works, new rows come above the old
    // ids, and the counters the triggers keep still move.
    app.restart();
    let client = app.client();
    let me = client.api("GET", "/newsletter", &key, None);
    me.expect(200);
    assert_eq!(me.json()["data"]["subscriber_count"], 2, "{}", me.body);
    let sid = created_id(&client.api(
        "POST",
        "/subscribers",
        &key,
        Some(&json!({"email": "d@example.com"})),
    ));
    assert_eq!(sid, 41);
    let iid = created_id(&client.api(
        "POST",
        "/issues",
        &key,
        Some(&json!({"issue": {"subject": "New", "articles": [{"title": "C", "url": "https://c.example/"}]}})),
    ));
    assert_eq!(iid, 8);
    let article = client
        .api("GET", &format!("/issues/{iid}"), &key, None)
        .json()["articles"][0]["id"]
        .clone();
    assert_eq!(article, 9);
    client
        .api("DELETE", &format!("/issues/{iid}"), &key, None)
        .expect(204);
    let again = created_id(&client.api(
        "POST",
        "/issues",
        &key,
        Some(&json!({"issue": {"subject": "Again"}})),
    ));
    assert_eq!(again, 9);
    let me = client.api("GET", "/newsletter", &key, None);
    assert_eq!(me.json()["data"]["subscriber_count"], 3, "{}", me.body);
}
