//! Schema-only field types: what the OpenAPI document states about a request's fields and
//! parameters (lengths, patterns, enums, integer bounds, required), taken from the domain's
//! own constants, while parsing stays as loose as before. The domain still checks every value
//! and words the refusal (422 `validation_error` with the field's message); poem-openapi's
//! `validator(...)` attributes would refuse first, in its own words, as a parse failure. See
//! docs/api.md, "What the schema states".

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;
use std::ops::Deref;

use poem_openapi::registry::{MetaSchema, MetaSchemaRef, Registry};
use poem_openapi::types::{
    Example, MaybeUndefined, ParseError, ParseFromJSON, ParseFromParameter, ParseResult, ToJSON,
    Type,
};
use serde_json::{Value, json};

use crate::domain::values::text_pattern::{self, Refused, WHITESPACE};
use crate::domain::values::web_url::{self, Schemes};
use crate::domain::{
    delivery::relays, events, events::webhooks, issues, newsletters, newsletters::mail_details,
    newsletters::site_pages, newsletters::site_theme, newsletters::welcome, sequences, subscribers,
    subscribers::custom_fields, values::email, values::pagination,
};

/// The schema a field's rule states in the document.
pub trait Rule: Send + Sync + 'static {
    fn schema() -> MetaSchema;
}

/// A string (in a JSON body: a JSON string and only a string; poem-openapi's `String` would
/// turn `12` into `"12"`), or a query or path parameter taken as written, whose schema states
/// rule `R`. A missing parameter is the empty string: the domain refuses it in its words.
pub struct Field<R>(pub String, PhantomData<fn() -> R>);

/// A string with no rule of its own to state.
pub type Text = Field<AnyText>;

impl<R> Field<R> {
    pub fn new(text: impl Into<String>) -> Self {
        Field(text.into(), PhantomData)
    }
}

impl<R> Clone for Field<R> {
    fn clone(&self) -> Self {
        Field::new(self.0.clone())
    }
}

impl<R> Default for Field<R> {
    fn default() -> Self {
        Field::new(String::new())
    }
}

impl<R> fmt::Debug for Field<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl<R> PartialEq for Field<R> {
    fn eq(&self, other: &Self) -> bool {
        self.0 == other.0
    }
}

impl<R> Deref for Field<R> {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

/// As a JSON string, for the doors that read a body with serde (`POST /bounces/<token>`).
impl<'de, R> serde::Deserialize<'de> for Field<R> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer).map(Field::new)
    }
}

impl<R> From<Field<R>> for String {
    fn from(field: Field<R>) -> String {
        field.0
    }
}

/// poem-openapi's name for a schema in its parse errors: `string`, or with the format,
/// `string(email)`, as `api/body_errors.rs` reads them back from the document.
fn type_name(schema: &MetaSchema) -> Cow<'static, str> {
    match schema.format {
        Some(format) => format!("{}({format})", schema.ty).into(),
        None => schema.ty.into(),
    }
}

/// `Type` for a wrapper of one value whose schema is its rule's (`Field`, `Number`), with
/// `raw` the value's type and `is_empty` its emptiness.
macro_rules! rule_type {
    ($wrapper:ident, $raw:ty, $is_empty:expr) => {
        impl<R: Rule> Type for $wrapper<R> {
            const IS_REQUIRED: bool = true;
            type RawValueType = $raw;
            type RawElementValueType = $raw;

            fn name() -> Cow<'static, str> {
                type_name(&R::schema())
            }

            fn schema_ref() -> MetaSchemaRef {
                MetaSchemaRef::Inline(Box::new(R::schema()))
            }

            fn as_raw_value(&self) -> Option<&Self::RawValueType> {
                Some(&self.0)
            }

            fn raw_element_iter<'a>(
                &'a self,
            ) -> Box<dyn Iterator<Item = &'a Self::RawElementValueType> + 'a> {
                Box::new(std::iter::once(&self.0))
            }

            fn is_empty(&self) -> bool {
                let is_empty: fn(&$raw) -> bool = $is_empty;
                is_empty(&self.0)
            }
        }
    };
}

rule_type!(Field, String, String::is_empty);

impl<R: Rule> ParseFromJSON for Field<R> {
    fn parse_from_json(value: Option<Value>) -> ParseResult<Self> {
        match value.unwrap_or_default() {
            Value::String(text) => Ok(Field::new(text)),
            other => Err(ParseError::expected_type(other)),
        }
    }
}

impl<R: Rule> ParseFromParameter for Field<R> {
    fn parse_from_parameter(value: &str) -> ParseResult<Self> {
        Ok(Field::new(value))
    }

    fn parse_from_parameters<I: IntoIterator<Item = A>, A: AsRef<str>>(
        iter: I,
    ) -> ParseResult<Self> {
        let first = iter.into_iter().next();
        Ok(Field::new(first.as_ref().map_or("", AsRef::as_ref)))
    }
}

impl<R: Rule> ToJSON for Field<R> {
    fn to_json(&self) -> Option<Value> {
        Some(Value::String(self.0.clone()))
    }
}

/// A JSON number (in a body: a JSON number and only a number) whose schema states rule `R`
/// (`integer` or `number` and its bounds). The domain gets it as the text it would be typed
/// as ([`Number::text`]) and words the refusal of a value out of bounds or with a fraction,
/// as it does for the same field of a form.
pub struct Number<R>(pub serde_json::Number, PhantomData<fn() -> R>);

impl<R> Number<R> {
    /// The number as typed: `587`, `1.5`; a whole number written with a zero fraction
    /// (`587.0`) as the whole number.
    pub fn text(&self) -> String {
        match self.0.as_f64() {
            Some(f)
                if !self.0.is_i64() && !self.0.is_u64() && f.fract() == 0.0 && f.abs() < 1e15 =>
            {
                format!("{}", f as i64)
            }
            _ => self.0.to_string(),
        }
    }
}

impl<R> fmt::Debug for Number<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

rule_type!(Number, serde_json::Number, |_| false);

impl<R: Rule> ParseFromJSON for Number<R> {
    fn parse_from_json(value: Option<Value>) -> ParseResult<Self> {
        match value.unwrap_or_default() {
            Value::Number(n) => Ok(Number(n, PhantomData)),
            other => Err(ParseError::expected_type(other)),
        }
    }
}

impl<R: Rule> ToJSON for Number<R> {
    fn to_json(&self) -> Option<Value> {
        Some(Value::Number(self.0.clone()))
    }
}

/// A field the document marks required whose absence (or `null`) still reaches the domain,
/// which words the refusal (a subscriber without `email` is 422 `invalid_email`). `null` is
/// kept apart from absence: it is a value given, refused, never filled in from elsewhere.
#[derive(Debug)]
pub struct Required<T>(pub MaybeUndefined<T>);

impl<T: Type> Type for Required<T> {
    const IS_REQUIRED: bool = true;
    type RawValueType = T::RawValueType;
    type RawElementValueType = T::RawElementValueType;

    fn name() -> Cow<'static, str> {
        <Option<T>>::name()
    }

    fn schema_ref() -> MetaSchemaRef {
        T::schema_ref()
    }

    fn register(registry: &mut Registry) {
        T::register(registry);
    }

    fn as_raw_value(&self) -> Option<&Self::RawValueType> {
        self.0.as_raw_value()
    }

    fn raw_element_iter<'a>(
        &'a self,
    ) -> Box<dyn Iterator<Item = &'a Self::RawElementValueType> + 'a> {
        self.0.raw_element_iter()
    }
}

impl<T: ParseFromJSON> ParseFromJSON for Required<T> {
    fn parse_from_json(value: Option<Value>) -> ParseResult<Self> {
        <MaybeUndefined<T>>::parse_from_json(value)
            .map(Required)
            .map_err(ParseError::propagate)
    }
}

impl<T: ToJSON> ToJSON for Required<T> {
    fn to_json(&self) -> Option<Value> {
        self.0.to_json()
    }
}

/// A JSON array whose schema states `minItems` `MIN` and `maxItems` `MAX` (0: none), where the
/// domain counts the entries as sent and refuses more in its words.
#[derive(Debug)]
pub struct Items<T, const MIN: usize, const MAX: usize>(pub Vec<T>);

impl<T: Type, const MIN: usize, const MAX: usize> Type for Items<T, MIN, MAX> {
    const IS_REQUIRED: bool = true;
    type RawValueType = Vec<T>;
    type RawElementValueType = <Vec<T> as Type>::RawElementValueType;

    fn name() -> Cow<'static, str> {
        <Vec<T>>::name()
    }

    fn schema_ref() -> MetaSchemaRef {
        <Vec<T>>::schema_ref().merge(MetaSchema {
            min_items: (MIN > 0).then_some(MIN),
            max_items: (MAX > 0).then_some(MAX),
            ..MetaSchema::ANY
        })
    }

    fn register(registry: &mut Registry) {
        <Vec<T>>::register(registry);
    }

    fn as_raw_value(&self) -> Option<&Self::RawValueType> {
        Some(&self.0)
    }

    fn raw_element_iter<'a>(
        &'a self,
    ) -> Box<dyn Iterator<Item = &'a Self::RawElementValueType> + 'a> {
        self.0.raw_element_iter()
    }
}

impl<T: ParseFromJSON, const MIN: usize, const MAX: usize> ParseFromJSON for Items<T, MIN, MAX> {
    fn parse_from_json(value: Option<Value>) -> ParseResult<Self> {
        <Vec<T>>::parse_from_json(value)
            .map(Items)
            .map_err(ParseError::propagate)
    }
}

impl<T: ToJSON, const MIN: usize, const MAX: usize> ToJSON for Items<T, MIN, MAX> {
    fn to_json(&self) -> Option<Value> {
        self.0.to_json()
    }
}

impl<T, const MIN: usize, const MAX: usize> IntoIterator for Items<T, MIN, MAX> {
    type Item = T;
    type IntoIter = std::vec::IntoIter<T>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

/// The fields of which a request object needs at least one (`R::FIELDS`).
pub trait AnyOf: Send + Sync + 'static {
    const FIELDS: &'static [&'static str];
}

/// A JSON object `T` whose schema also states that at least one of `R::FIELDS` is present
/// (`anyOf` of `required`), where the object derive can only mark each field alone. Parsed as
/// `T`, so a missing field is still refused by the domain, in its words.
pub struct OneRequired<T, R>(pub T, pub PhantomData<fn() -> R>);

impl<T: Type, R: AnyOf> Type for OneRequired<T, R> {
    const IS_REQUIRED: bool = true;
    type RawValueType = T::RawValueType;
    type RawElementValueType = T::RawElementValueType;

    fn name() -> Cow<'static, str> {
        T::name()
    }

    fn schema_ref() -> MetaSchemaRef {
        T::schema_ref()
    }

    fn register(registry: &mut Registry) {
        T::register(registry);
        if let Some(schema) = registry.schemas.get_mut(&*T::name()) {
            schema.any_of = R::FIELDS
                .iter()
                .map(|field| {
                    MetaSchemaRef::Inline(Box::new(MetaSchema {
                        required: vec![field],
                        ..MetaSchema::ANY
                    }))
                })
                .collect();
        }
    }

    fn as_raw_value(&self) -> Option<&Self::RawValueType> {
        self.0.as_raw_value()
    }

    fn raw_element_iter<'a>(
        &'a self,
    ) -> Box<dyn Iterator<Item = &'a Self::RawElementValueType> + 'a> {
        self.0.raw_element_iter()
    }
}

impl<T: ParseFromJSON, R: AnyOf> ParseFromJSON for OneRequired<T, R> {
    fn parse_from_json(value: Option<Value>) -> ParseResult<Self> {
        T::parse_from_json(value)
            .map(|object| OneRequired(object, PhantomData))
            .map_err(ParseError::propagate)
    }
}

/// A request body that may be left out or be JSON `null`, both meaning no body: poem-openapi
/// reads an empty body as `null`, so the document states the body `nullable` (an `Option`'s
/// schema would not), with `T`'s example beside it.
pub struct OrNull<T>(pub Option<T>);

impl<T: Type + Example + ToJSON> Type for OrNull<T> {
    const IS_REQUIRED: bool = false;
    type RawValueType = T::RawValueType;
    type RawElementValueType = T::RawElementValueType;

    fn name() -> Cow<'static, str> {
        format!("optional_{}", T::name()).into()
    }

    fn schema_ref() -> MetaSchemaRef {
        MetaSchemaRef::Inline(Box::new(MetaSchema {
            nullable: true,
            all_of: vec![T::schema_ref()],
            example: T::example().to_json(),
            ..MetaSchema::ANY
        }))
    }

    fn register(registry: &mut Registry) {
        T::register(registry);
    }

    fn as_raw_value(&self) -> Option<&Self::RawValueType> {
        self.0.as_ref().and_then(T::as_raw_value)
    }

    fn raw_element_iter<'a>(
        &'a self,
    ) -> Box<dyn Iterator<Item = &'a Self::RawElementValueType> + 'a> {
        self.0.raw_element_iter()
    }
}

impl<T: ParseFromJSON + Example + ToJSON> ParseFromJSON for OrNull<T> {
    fn parse_from_json(value: Option<Value>) -> ParseResult<Self> {
        Option::<T>::parse_from_json(value)
            .map(OrNull)
            .map_err(ParseError::propagate)
    }
}

/// A trimmed text of at most `max` characters (at least one unless `blank`), refusing
/// `refused` and `also` inside: `domain::clean_text`/`clean_line` and the checks built on them.
fn trimmed(max: usize, blank: bool, refused: Refused, also: &str) -> MetaSchema {
    MetaSchema {
        min_length: (!blank).then_some(1),
        max_length: Some(max),
        pattern: Some(text_pattern::pattern(blank, refused, also)),
        ..MetaSchema::new("string")
    }
}

/// One of `values`, as the domain's enum writes them.
fn one_of<'a>(values: impl IntoIterator<Item = &'a str>) -> MetaSchema {
    MetaSchema {
        enum_items: values.into_iter().map(|v| json!(v)).collect(),
        ..MetaSchema::new("string")
    }
}

/// One of `values`, or null (a field whose null leaves the value as it is): OpenAPI 3.0 wants
/// null among the values of a nullable enum.
fn one_of_or_null<'a>(values: impl IntoIterator<Item = &'a str>) -> MetaSchema {
    let mut schema = one_of(values);
    schema.enum_items.push(Value::Null);
    schema.nullable = true;
    schema
}

/// A web address of at most `max` characters with `schemes` (`domain/values/web_url.rs`). No
/// `format: uri`: the server takes what browsers take (spaces and non-ASCII in a path),
/// which RFC 3986 does not.
fn web_url(max: usize, schemes: Schemes) -> MetaSchema {
    MetaSchema {
        max_length: Some(max),
        pattern: Some(web_url::pattern(schemes)),
        ..MetaSchema::new("string")
    }
}

/// Declares rules: `Name => schema expression;`.
macro_rules! rules {
    ($($(#[$meta:meta])* $name:ident => $schema:expr;)+) => {$(
        $(#[$meta])*
        pub struct $name;

        impl Rule for $name {
            fn schema() -> MetaSchema {
                $schema
            }
        }
    )+};
}

rules! {
    /// Any string.
    AnyText => MetaSchema::new("string");
    /// An e-mail address (`domain/values/email.rs`).
    Email => MetaSchema {
        format: Some("email"),
        max_length: Some(email::MAX_BYTES),
        ..MetaSchema::new("string")
    };
    /// A subscriber's tag.
    Tag => trimmed(subscribers::TAG_MAX, false, Refused::Controls, "");
    /// A tag, or blank for none (a sequence's exit tags).
    TagOrBlank => trimmed(subscribers::TAG_MAX, true, Refused::Controls, "");
    /// A sequence's name.
    SequenceName => trimmed(sequences::NAME_MAX, false, Refused::Controls, "");
    /// Whether a sequence runs; null leaves it.
    SequenceStatus => one_of_or_null(sequences::Status::ALL.iter().map(|s| s.as_str()));
    /// What enters a reader into a sequence.
    SequenceTrigger => one_of(sequences::Trigger::ALL.iter().map(|t| t.as_str()));
    /// A sequence step's subject: one line.
    StepSubject => trimmed(sequences::SUBJECT_MAX, false, Refused::Controls, "");
    /// A sequence step's Markdown.
    StepBody => trimmed(sequences::BODY_MAX, false, Refused::ControlsButBreaks, "");
    /// A step's delay, in its unit: 0 to a year.
    DelayAmount => MetaSchema {
        format: Some("int64"),
        minimum: Some(0.0),
        maximum: Some((sequences::schedule::DELAY_MAX_DAYS * 24 * 60) as f64),
        ..MetaSchema::new("integer")
    };
    /// A step delay's unit.
    DelayUnitName => one_of(sequences::DelayUnit::ALL.iter().map(|u| u.as_str()));
    /// An hour of the day on the newsletter's clocks.
    AtHour => MetaSchema {
        format: Some("int64"),
        minimum: Some(0.0),
        maximum: Some(23.0),
        nullable: true,
        ..MetaSchema::new("integer")
    };
    /// A day of the week; null is any day.
    WeekdayName => one_of_or_null(sequences::Weekday::ALL.iter().map(|d| d.as_str()));
    /// A custom field's name. The server takes a lowercase letter, then lowercase letters,
    /// digits and underscores (422 otherwise), and refuses the subscriber's own details
    /// (`email`, `name`, ...).
    CustomFieldName => MetaSchema {
        min_length: Some(1),
        max_length: Some(custom_fields::NAME_MAX),
        pattern: Some("^[a-z][a-z0-9_]*$".into()),
        ..MetaSchema::new("string")
    };
    /// What a custom field holds.
    CustomFieldType => one_of(custom_fields::FieldType::ALL.iter().map(|t| t.as_str()));
    /// One option of a `choice` field.
    ChoiceOption => trimmed(custom_fields::OPTION_MAX, false, Refused::Controls, "");
    /// A subscriber's name; blank is no name.
    SubscriberName => trimmed(subscribers::NAME_MAX, true, Refused::Controls, "");
    /// The statuses an owner may give a subscriber; null leaves it.
    SubscriberStatus => one_of_or_null(
        subscribers::Status::ALL.iter().filter(|s| s.can_be_set()).map(|s| s.as_str()),
    );
    /// The subscriber list's `status` filter; empty is no filter.
    SubscriberStatusFilter => one_of(
        subscribers::Status::ALL.iter().map(|s| s.as_str()).chain([""]),
    );
    /// The statuses an issue may be given (an editable one); null leaves it.
    IssueStatus => one_of_or_null(
        issues::Status::ALL.iter().filter(|s| s.is_editable()).map(|s| s.as_str()),
    );
    /// Who may read an issue on the site; null leaves it.
    IssueVisibility => one_of_or_null(issues::Visibility::ALL.iter().map(|v| v.as_str()));
    /// What an owner or a script may make a membership (Stripe's own statuses come from
    /// Stripe).
    MembershipStatus => one_of(["paid", "comped", "free"]);
    /// The issue list's `status` filter; empty is no filter.
    IssueStatusFilter => one_of(issues::Status::ALL.iter().map(|s| s.as_str()).chain([""]));
    /// An issue's subject: one line (tabs allowed).
    Subject => trimmed(issues::SUBJECT_MAX, false, Refused::ControlsButTab, "");
    /// When a scheduled issue goes out: an RFC 3339 date-time, or a blank string, which clears
    /// it as `null` does.
    DateTime => MetaSchema {
        any_of: vec![
            MetaSchemaRef::Inline(Box::new(MetaSchema {
                format: Some("date-time"),
                ..MetaSchema::new("string")
            })),
            MetaSchemaRef::Inline(Box::new(MetaSchema {
                pattern: Some(format!("^[{WHITESPACE}]*$")),
                ..MetaSchema::new("string")
            })),
        ],
        ..MetaSchema::new("string")
    };
    /// An article's title.
    ArticleTitle => trimmed(issues::TITLE_MAX, false, Refused::ControlsButBreaks, "");
    /// An article's link.
    ArticleUrl => web_url(issues::URL_MAX, Schemes::HttpOrHttps);
    /// The picture of an issue's link previews; blank is the content's first image.
    SocialImageUrl => MetaSchema {
        pattern: Some(format!("^[{WHITESPACE}]*$|{}", web_url::pattern(Schemes::HttpOrHttps))),
        ..web_url(issues::URL_MAX, Schemes::HttpOrHttps)
    };
    /// An article's summary.
    ArticleSummary => trimmed(issues::SUMMARY_MAX, true, Refused::ControlsButBreaks, "");
    /// A newsletter's name.
    NewsletterName => trimmed(newsletters::NAME_MAX, false, Refused::Controls, "");
    /// A newsletter's tagline.
    Tagline => trimmed(newsletters::TAGLINE_MAX, true, Refused::Controls, "");
    /// The From name of issues.
    SenderName => trimmed(
        newsletters::SENDER_NAME_MAX,
        false,
        Refused::Controls,
        &String::from_iter(newsletters::SENDER_NAME_REFUSES),
    );
    /// The welcome e-mail's subject; blank is the default.
    WelcomeSubject => trimmed(welcome::SUBJECT_MAX, true, Refused::Controls, "");
    /// The welcome e-mail's Markdown; blank is the default.
    WelcomeBody => trimmed(welcome::BODY_MAX, true, Refused::ControlsButBreaks, "");
    /// The public site's accent colour; blank is the default.
    HexColor => MetaSchema {
        pattern: Some(format!(
            "^[{WHITESPACE}]*(?:{}[{WHITESPACE}]*)?$",
            site_theme::AccentColor::PATTERN
        )),
        ..MetaSchema::new("string")
    };
    /// The public site's logo: an https URL; blank is none.
    LogoUrl => MetaSchema {
        pattern: Some(format!("^[{WHITESPACE}]*$|{}", web_url::pattern(Schemes::HttpsOnly))),
        ..web_url(site_theme::LOGO_URL_MAX, Schemes::HttpsOnly)
    };
    /// Where replies to a newsletter's mail go; blank is the sender address.
    ReplyTo => MetaSchema {
        any_of: vec![
            MetaSchemaRef::Inline(Box::new(MetaSchema {
                format: Some("email"),
                max_length: Some(email::MAX_BYTES),
                ..MetaSchema::new("string")
            })),
            MetaSchemaRef::Inline(Box::new(MetaSchema {
                pattern: Some(format!("^[{WHITESPACE}]*$")),
                ..MetaSchema::new("string")
            })),
        ],
        ..MetaSchema::new("string")
    };
    /// The Markdown of a newsletter's about page; blank is none.
    AboutMarkdown => trimmed(site_pages::ABOUT_MAX, true, Refused::ControlsButBreaks, "");
    /// The author's name on a newsletter's site; blank is none.
    AuthorName => trimmed(site_pages::AUTHOR_NAME_MAX, true, Refused::Controls, "");
    /// The author's picture: an `https://` image, or `/media/…` of the newsletter's own.
    AuthorImageUrl => MetaSchema {
        pattern: Some(format!(
            "^[{WHITESPACE}]*$|^[{WHITESPACE}]*{}[{WHITESPACE}]*$|{}",
            site_pages::OWN_IMAGE_PATTERN,
            web_url::pattern(Schemes::HttpsOnly)
        )),
        ..web_url(site_pages::AUTHOR_IMAGE_MAX, Schemes::HttpsOnly)
    };
    /// The postal address of a newsletter's mail footer; blank is none.
    PostalAddress => trimmed(mail_details::POSTAL_ADDRESS_MAX, true, Refused::ControlsButBreaks, "");
    /// A webhook subscription's URL.
    WebhookUrl => web_url(webhooks::URL_MAX, Schemes::HttpOrHttps);
    /// A name of the IANA time zone database; null leaves the newsletter's. A string, not an
    /// `enum` of the names: the database's ~600 names include `GMT0`, `GMT+0` and `GMT-0`,
    /// which client generators turn into one identifier and refuse. The server
    /// still refuses a name the bundled database lacks (422).
    TimeZone => MetaSchema {
        nullable: true,
        ..MetaSchema::new("string")
    };
    /// An event name.
    Event => one_of(events::KINDS.iter().copied());
    /// A resource's id in a path; anything else names nothing (404).
    Id => MetaSchema {
        format: Some("int64"),
        minimum: Some(1.0),
        ..MetaSchema::new("integer")
    };
    /// A page number.
    PageNumber => MetaSchema {
        minimum: Some(1.0),
        default: Some(json!(1)),
        ..MetaSchema::new("integer")
    };
    /// Items per page. The schema states the most; the server counts a larger number as the
    /// most (docs/decisions.md), so a client that keeps to the schema never sees the difference.
    PerPage => MetaSchema {
        minimum: Some(1.0),
        maximum: Some(f64::from(pagination::MAX_PER_PAGE)),
        default: Some(json!(pagination::DEFAULT_PER_PAGE)),
        ..MetaSchema::new("integer")
    };
    /// A mail relay's host: a DNS name or an IPv4 address (an IPv6 address in brackets is
    /// taken too, beyond the pattern; `domain/delivery/relays.rs`).
    RelayHost => MetaSchema {
        max_length: Some(relays::HOST_MAX),
        pattern: Some(relays::host_pattern()),
        ..MetaSchema::new("string")
    };
    /// Hours after a send that its resend to those who did not open goes.
    ResendAfterHours => MetaSchema {
        format: Some("int64"),
        minimum: Some(1.0),
        maximum: Some(issues::resend_unopened::AFTER_HOURS_MAX as f64),
        ..MetaSchema::new("integer")
    };
    /// A TCP port.
    Port => MetaSchema {
        format: Some("int32"),
        minimum: Some(1.0),
        maximum: Some(65535.0),
        ..MetaSchema::new("integer")
    };
    /// How the connection to a relay is secured.
    RelayTlsMode => one_of(relays::TlsMode::ALL.iter().map(|m| m.as_str()));
    /// A relay's user name; blank is none.
    RelayUsername => trimmed(relays::USERNAME_MAX, true, Refused::Controls, "");
    /// A relay's password: taken as sent (spaces count), without control characters.
    RelayPassword => MetaSchema {
        min_length: Some(1),
        max_length: Some(relays::PASSWORD_MAX),
        pattern: Some(format!("^[^{}]+$", Refused::Controls.class())),
        format: Some("password"),
        ..MetaSchema::new("string")
    };
    /// A relay's limit: messages per second, hour or day.
    RelayLimit => MetaSchema {
        format: Some("int64"),
        minimum: Some(1.0),
        maximum: Some(f64::from(relays::LIMIT_MAX)),
        ..MetaSchema::new("integer")
    };
    /// The warm-up's cap of the first day.
    FirstDayCap => MetaSchema {
        format: Some("int32"),
        minimum: Some(1.0),
        maximum: Some(f64::from(relays::WARM_UP_FIRST_DAY_MAX)),
        default: Some(json!(relays::WARM_UP_FIRST_DAY_DEFAULT)),
        ..MetaSchema::new("integer")
    };
    /// The warm-up's growth factor.
    GrowthFactor => MetaSchema {
        format: Some("double"),
        minimum: Some(relays::WARM_UP_FACTOR_MIN),
        maximum: Some(relays::WARM_UP_FACTOR_MAX),
        default: Some(json!(relays::WARM_UP_FACTOR_DEFAULT)),
        ..MetaSchema::new("number")
    };
    /// The subscriber list's cursor (`domain::values::pagination::Cursor`), `<page>.<id>`.
    ListCursor => MetaSchema {
        pattern: Some(pagination::Cursor::pattern()),
        ..MetaSchema::new("string")
    };
}
