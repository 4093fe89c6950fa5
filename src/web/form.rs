//! URL-encoded form bodies, with repeated keys (`api_key[permissions][]`) kept.

use poem::Body;

use super::WebError;

/// The largest form body accepted (CSV uploads use their own limit).
const FORM_LIMIT: usize = 1024 * 1024;

/// A parsed form: every `(name, value)` pair in order.
#[derive(Debug, Default, Clone)]
pub struct FormData(Vec<(String, String)>);

impl FormData {
    pub async fn read(body: Body) -> Result<Self, WebError> {
        let bytes = body
            .into_bytes_limit(FORM_LIMIT)
            .await
            .map_err(|e| WebError::BadForm(format!("unreadable form: {e}")))?;
        Ok(Self::parse(&bytes))
    }

    pub fn parse(bytes: &[u8]) -> Self {
        FormData(url::form_urlencoded::parse(bytes).into_owned().collect())
    }

    /// The first value of `name`, or "" when absent.
    pub fn get(&self, name: &str) -> &str {
        self.0
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
            .unwrap_or("")
    }

    /// Every value of `name`, in order.
    pub fn all(&self, name: &str) -> Vec<String> {
        self.0
            .iter()
            .filter(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
            .collect()
    }
}
