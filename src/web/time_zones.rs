//! Times in the dashboard (`docs/time-zones.md`): the one format every page shows a time in
//! ("26 Nov 2026, 09:00 CET", on the clocks of the signed-in account's zone, inside a
//! `<time datetime="…Z">` for machines), the account page's zone field, and the sign-up
//! page's script that proposes the browser's zone.

use maud::{Markup, html};
use poem::web::Data;
use poem::{Body, Request, Response, handler};

use super::layout::csrf_field;
use super::{Ctx, FormData, State, WebError, WebResult, see_other};
use crate::clock::Timestamp;
use crate::domain::values::time_zones::{self, TimeZoneName};
use crate::http::public_page::{FOR_AN_HOUR, JAVASCRIPT, asset};

/// `at` for people, on `zone`'s clocks: `26 Nov 2026, 09:00 CET`.
pub fn friendly(at: Timestamp, zone: &TimeZoneName) -> String {
    zone.local(at).strftime("%-d %b %Y, %H:%M %Z").to_string()
}

/// `at` as a page shows it: [`friendly`] inside a `<time>` whose `datetime` is the UTC
/// instant the API serves.
pub fn shown(at: Timestamp, zone: &TimeZoneName) -> Markup {
    html! { time datetime=(at) { (friendly(at, zone)) } }
}

/// A `<select>` of every IANA zone named `name`, `current` chosen.
pub fn zone_select(name: &str, id: &str, current: &TimeZoneName) -> Markup {
    html! {
        select #(id) name=(name) {
            @for zone in TimeZoneName::all() {
                option value=(zone) selected[zone == current.as_str()] { (zone) }
            }
        }
    }
}

/// The account page's section: the zone times are shown and typed in.
pub fn account_section(ctx: &Ctx) -> Markup {
    let zone = ctx.zone();
    let own = ctx.user.as_ref().is_some_and(|u| u.own_time_zone);
    html! {
        h2 { "Time zone" }
        @if own {
            p.muted { "The dashboard shows every time on these clocks, and the times you type (a send time) are read on them. It is now " (shown(Timestamp::now(), &zone)) "." }
        } @else {
            p.muted { "Each newsletter's pages show its times, and read the times you type, on the clocks of its own time zone (its settings). Pick a zone here to see every page on your own clocks instead; pages that are no newsletter's use " (zone) " (now " (shown(Timestamp::now(), &zone)) ")." }
        }
        form.stack method="post" action="/account/time_zone" {
            (csrf_field(ctx))
            label for="time-zone" { "Time zone" }
            select #time-zone name="time_zone" {
                option value="" selected[!own] { "Each newsletter's own zone" }
                @for name in TimeZoneName::all() {
                    option value=(name) selected[own && name == zone.as_str()] { (name) }
                }
            }
            button type="submit" { "Save time zone" }
        }
    }
}

/// `POST /account/time_zone`: the signed-in account's zone.
#[handler]
pub async fn update_account_zone(
    req: &Request,
    body: Body,
    Data(state): Data<&State>,
) -> WebResult {
    let form = FormData::read(body).await?;
    let ctx = Ctx::load_verified(req, state, &form).await?;
    let user_id = ctx.user()?.id;
    // Blank: follow each newsletter's zone.
    let zone = match form.get("time_zone").trim() {
        "" => None,
        typed => Some(TimeZoneName::parse(typed).map_err(|m| WebError::BadForm(m.into()))?),
    };
    let saved = zone.clone();
    state
        .db
        .run(move |conn| time_zones::set_account_zone(conn, user_id, saved.as_ref()))
        .await?;
    ctx.notice_next(
        req,
        &match zone {
            Some(zone) => format!("Times are now shown in {zone} on every page."),
            None => "Each newsletter's times are now shown in its own time zone.".to_string(),
        },
    );
    see_other("/account")
}

/// The hidden field of the sign-up form that [`script`] fills with the browser's zone.
pub fn browser_zone_field() -> Markup {
    html! {
        input type="hidden" name="user[time_zone]" value="UTC" data-browser-time-zone;
        script src="/assets/time-zone.js" defer {}
    }
}

/// `GET /assets/time-zone.js`: puts the browser's IANA zone into the sign-up form (a file,
/// since the dashboard's Content-Security-Policy runs no inline script).
#[handler]
pub fn script() -> Response {
    asset(
        JAVASCRIPT,
        FOR_AN_HOUR,
        include_str!("../../assets/time-zone.js"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_read_in_the_zone_with_its_abbreviation() {
        let at = Timestamp::parse("2026-11-26T08:00:00.000Z").unwrap();
        let berlin = TimeZoneName::parse("Europe/Berlin").unwrap();
        assert_eq!(friendly(at, &berlin), "26 Nov 2026, 09:00 CET");
        assert_eq!(friendly(at, &TimeZoneName::utc()), "26 Nov 2026, 08:00 UTC");
        let summer = Timestamp::parse("2026-07-01T07:00:00.000Z").unwrap();
        assert_eq!(friendly(summer, &berlin), "1 Jul 2026, 09:00 CEST");
        assert_eq!(
            shown(at, &berlin).into_string(),
            "<time datetime=\"2026-11-26T08:00:00.000Z\">26 Nov 2026, 09:00 CET</time>"
        );
    }
}
