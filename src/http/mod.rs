//! What every door shares on the way in and out over HTTP: the server loop with its read
//! deadlines for slow clients (docs/security.md, "Slow clients and uploads").

pub mod server;
