//! Text answers (HTML, CSS, JavaScript, the Atom feed, JSON) go out compressed when the
//! client accepts it: brotli, else gzip, by poem's encoders (`poem::web::Compress`). Only
//! responses are compressed: request bodies are read as sent (a compressed upload could
//! expand past the body limits), and images, empty answers and ranges are left alone.

use poem::http::{HeaderValue, Method, StatusCode, header};
use poem::web::{Compress, CompressionAlgo};
use poem::{Endpoint, IntoResponse, Middleware, Request, Response};

/// Compresses the text answers of the endpoint it wraps.
pub struct CompressText;

impl<E: Endpoint> Middleware<E> for CompressText {
    type Output = CompressTextEndpoint<E>;

    fn transform(&self, inner: E) -> Self::Output {
        CompressTextEndpoint { inner }
    }
}

pub struct CompressTextEndpoint<E> {
    inner: E,
}

impl<E: Endpoint> Endpoint for CompressTextEndpoint<E> {
    type Output = Response;

    async fn call(&self, req: Request) -> poem::Result<Response> {
        let algo = match req.method() {
            &Method::HEAD => None,
            _ => chosen(req.headers().get_all(header::ACCEPT_ENCODING).iter()),
        };
        let mut response = self.inner.call(req).await?.into_response();
        if compressible(&response) {
            response
                .headers_mut()
                .append(header::VARY, HeaderValue::from_static("accept-encoding"));
            if let Some(algo) = algo {
                return Ok(Compress::new(response, algo).into_response());
            }
        }
        Ok(response)
    }
}

/// Text worth compressing, with a body, not already encoded.
fn compressible(response: &Response) -> bool {
    let text = response.content_type().is_some_and(|t| {
        let t = t.split(';').next().unwrap_or("").trim();
        t.starts_with("text/")
            || matches!(
                t,
                "application/json" | "application/atom+xml" | "application/javascript"
            )
    });
    text && !matches!(
        response.status(),
        StatusCode::NO_CONTENT | StatusCode::NOT_MODIFIED | StatusCode::PARTIAL_CONTENT
    ) && !response.headers().contains_key(header::CONTENT_ENCODING)
}

/// Brotli when the client takes it, else gzip, else nothing; `q=0` refuses a coding, and
/// `*` stands for both.
fn chosen<'a>(values: impl Iterator<Item = &'a HeaderValue>) -> Option<CompressionAlgo> {
    let (mut br, mut gzip) = (None, None);
    for item in values
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
    {
        let mut parts = item.split(';').map(str::trim);
        let coding = parts.next().unwrap_or("").to_ascii_lowercase();
        let accepted = parts
            .filter_map(|p| p.strip_prefix("q="))
            .filter_map(|q| q.parse::<f32>().ok())
            .next_back()
            .is_none_or(|q| q > 0.0);
        match coding.as_str() {
            "br" => br = Some(accepted),
            "gzip" | "x-gzip" => gzip = Some(accepted),
            "*" => {
                br.get_or_insert(accepted);
                gzip.get_or_insert(accepted);
            }
            _ => {}
        }
    }
    match (br, gzip) {
        (Some(true), _) => Some(CompressionAlgo::BR),
        (_, Some(true)) => Some(CompressionAlgo::GZIP),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pick(header: &str) -> Option<CompressionAlgo> {
        chosen([HeaderValue::from_str(header).unwrap()].iter())
    }

    #[test]
    fn brotli_first_then_gzip_and_q0_refuses() {
        assert_eq!(pick("gzip, deflate, br"), Some(CompressionAlgo::BR));
        assert_eq!(pick("gzip"), Some(CompressionAlgo::GZIP));
        assert_eq!(pick("br;q=0, gzip"), Some(CompressionAlgo::GZIP));
        assert_eq!(pick("gzip;q=0"), None);
        assert_eq!(pick("identity"), None);
        assert_eq!(pick("*"), Some(CompressionAlgo::BR));
        assert_eq!(pick("br;q=0, *"), Some(CompressionAlgo::GZIP));
    }
}
