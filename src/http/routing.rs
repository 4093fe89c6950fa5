//! `get(..).post(..)` as in poem, for the pages' routes. poem's `RouteMethod` answers a
//! method it has no endpoint for with a bare 405; RFC 9110 wants that answer to say which
//! methods the path does accept (`Allow`), and only the route knows.

use poem::error::MethodNotAllowedError;
use poem::http::{HeaderValue, Method, StatusCode};
use poem::{Endpoint, IntoEndpoint, Request, Response, RouteMethod};

/// The endpoints of one path, by method; HEAD is answered as GET without a body.
pub struct Methods {
    inner: RouteMethod,
    methods: Vec<Method>,
}

/// A path that answers GET (and HEAD).
pub fn get<E: IntoEndpoint<Endpoint: 'static>>(ep: E) -> Methods {
    Methods::new().method(Method::GET, ep)
}

/// A path that answers POST.
pub fn post<E: IntoEndpoint<Endpoint: 'static>>(ep: E) -> Methods {
    Methods::new().method(Method::POST, ep)
}

impl Methods {
    fn new() -> Self {
        Methods {
            inner: RouteMethod::new(),
            methods: Vec::new(),
        }
    }

    fn method<E: IntoEndpoint<Endpoint: 'static>>(mut self, method: Method, ep: E) -> Self {
        self.methods.push(method.clone());
        self.inner = self.inner.method(method, ep);
        self
    }

    pub fn get<E: IntoEndpoint<Endpoint: 'static>>(self, ep: E) -> Self {
        self.method(Method::GET, ep)
    }

    pub fn post<E: IntoEndpoint<Endpoint: 'static>>(self, ep: E) -> Self {
        self.method(Method::POST, ep)
    }

    pub fn patch<E: IntoEndpoint<Endpoint: 'static>>(self, ep: E) -> Self {
        self.method(Method::PATCH, ep)
    }

    pub fn delete<E: IntoEndpoint<Endpoint: 'static>>(self, ep: E) -> Self {
        self.method(Method::DELETE, ep)
    }

    /// A CORS preflight (the site's signup forms).
    pub fn options<E: IntoEndpoint<Endpoint: 'static>>(self, ep: E) -> Self {
        self.method(Method::OPTIONS, ep)
    }
}

impl Endpoint for Methods {
    type Output = Response;

    async fn call(&self, req: Request) -> poem::Result<Response> {
        // The path and its method exist: a request its door refuses before reading its body
        // (`csrf::CookieBeforeBody`) is refused now.
        if let Some(super::csrf::BodyRefused(refusal)) = req.extensions().get()
            && self.methods.contains(req.method())
        {
            return Err(refusal());
        }
        match self.inner.call(req).await {
            Err(e) if e.is::<MethodNotAllowedError>() => Err(method_not_allowed(&self.methods)),
            other => other,
        }
    }
}

/// The value of `Allow` for a path that answers `methods` (and HEAD wherever GET).
pub fn allow_header(methods: &[Method]) -> HeaderValue {
    let mut names: Vec<&str> = Vec::new();
    for method in methods {
        names.push(method.as_str());
        if *method == Method::GET {
            names.push(Method::HEAD.as_str());
        }
    }
    names.dedup();
    HeaderValue::from_str(&names.join(", ")).expect("method names are tokens")
}

/// A 405 that says what the path accepts. Made from a response, so the site's catch-all
/// (which turns unknown errors into its 404 page) passes it through as it is.
fn method_not_allowed(methods: &[Method]) -> poem::Error {
    let response = Response::builder()
        .status(StatusCode::METHOD_NOT_ALLOWED)
        .header("Allow", allow_header(methods))
        .content_type("text/plain; charset=utf-8")
        .body("Method not allowed");
    poem::Error::from_response(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn head_follows_get() {
        let value = allow_header(&[Method::GET, Method::POST, Method::DELETE]);
        assert_eq!(value, "GET, HEAD, POST, DELETE");
        assert_eq!(allow_header(&[Method::POST]), "POST");
    }
}
