//! Markdown to HTML, the one renderer's settings. Its own leaf, so the render budget (which
//! runs it in a child process or on a thread) and the content rules that call the budget do
//! not name each other.

/// Markdown to HTML as everywhere in Broadsheet: GitHub-flavoured, raw HTML escaped,
/// dangerous link schemes emptied.
pub fn markdown_to_html(source: &str) -> String {
    markdown::to_html_with_options(source, &markdown::Options::gfm())
        .unwrap_or_else(|_| markdown::to_html(source))
}
