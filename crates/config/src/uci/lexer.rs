//! UCI syntax without a schema: statements, quoting, sections (as OpenWrt's libuci reads them).

use std::collections::HashMap;
use std::fmt;

/// A UCI syntax error: where and what.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct UciSyntaxError {
    /// 1-based line number.
    pub line: usize,
    /// What is wrong there.
    pub message: String,
}

/// One `option` or `list` statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UciEntry {
    /// The option's name.
    pub name: String,
    /// Its value, unquoted.
    pub value: String,
    /// `list` (true) or `option` (false).
    pub list: bool,
    /// 1-based line of the statement.
    pub line: usize,
}

/// One `config <type> [<name>]` section with its statements in file order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UciSection {
    /// The `<type>` of `config <type>`.
    pub section_type: String,
    /// `None` for an anonymous section.
    pub name: Option<String>,
    /// Position among the sections of the same type (what `@type[index]` refers to).
    pub index: usize,
    /// 1-based line of the `config` statement.
    pub line: usize,
    /// Its `option` and `list` statements in file order.
    pub entries: Vec<UciEntry>,
}

impl UciSection {
    /// The value of `option <name>` as libuci resolves it: the last `option` wins; for a list, its
    /// values joined by spaces. `None` if absent.
    pub fn option(&self, name: &str) -> Option<String> {
        self.values(name).map(|v| v.join(" "))
    }

    /// The values of `name` as libuci resolves mixed statements: `option` replaces what came before,
    /// `list` appends (an earlier `option` value becomes the list's first element).
    pub fn values(&self, name: &str) -> Option<Vec<String>> {
        let mut out: Option<Vec<String>> = None;
        for e in self.entries.iter().filter(|e| e.name == name) {
            if e.list {
                out.get_or_insert_with(Vec::new).push(e.value.clone());
            } else {
                out = Some(vec![e.value.clone()]);
            }
        }
        out
    }

    /// `'main'` for a named section, `@rule[2]` for an anonymous one (uci's own notation).
    pub fn label(&self) -> String {
        match &self.name {
            Some(n) => format!("'{n}'"),
            None => format!("@{}[{}]", self.section_type, self.index),
        }
    }
}

/// A UCI boolean as libuci/`uci_get_bool` reads it: `1/yes/on/true/enabled` and
/// `0/no/off/false/disabled` (case-insensitive).
pub fn parse_bool(value: &str) -> Option<bool> {
    match value.trim().to_ascii_lowercase().as_str() {
        "1" | "yes" | "on" | "true" | "enabled" => Some(true),
        "0" | "no" | "off" | "false" | "disabled" => Some(false),
        _ => None,
    }
}

struct Lexer<'a> {
    chars: std::iter::Peekable<std::str::Chars<'a>>,
    line: usize,
}

impl Lexer<'_> {
    /// The next statement's words and its first line; `None` at the end of the text.
    fn statement(&mut self) -> Result<Option<(usize, Vec<String>)>, UciSyntaxError> {
        let mut words = Vec::new();
        let mut start = self.line;
        loop {
            match self.chars.peek().copied() {
                None => return Ok((!words.is_empty()).then_some((start, words))),
                Some('\n') => {
                    self.chars.next();
                    self.line += 1;
                    if !words.is_empty() {
                        return Ok(Some((start, words)));
                    }
                }
                Some(';') => {
                    self.chars.next();
                    if !words.is_empty() {
                        return Ok(Some((start, words)));
                    }
                }
                Some('#') => {
                    while self.chars.peek().is_some_and(|&c| c != '\n') {
                        self.chars.next();
                    }
                }
                Some(c) if c.is_whitespace() => {
                    self.chars.next();
                }
                Some(_) => {
                    if words.is_empty() {
                        start = self.line;
                    }
                    if let Some(w) = self.word()? {
                        words.push(w);
                    }
                }
            }
        }
    }

    /// One word (pieces joined); `None` if it was only a line continuation.
    fn word(&mut self) -> Result<Option<String>, UciSyntaxError> {
        let mut w = String::new();
        let mut started = false;
        while let Some(&c) = self.chars.peek() {
            match c {
                '\'' | '"' => {
                    let open = self.line;
                    self.chars.next();
                    started = true;
                    loop {
                        match self.chars.next() {
                            None => {
                                return Err(UciSyntaxError {
                                    line: open,
                                    message: format!("unterminated {c} quote"),
                                })
                            }
                            Some(q) if q == c => break,
                            Some('\\') if c == '"' => match self.chars.next() {
                                Some('\n') => self.line += 1,
                                Some(e) => w.push(e),
                                None => {
                                    return Err(UciSyntaxError {
                                        line: open,
                                        message: "unterminated \" quote".to_owned(),
                                    })
                                }
                            },
                            Some(ch) => {
                                if ch == '\n' {
                                    self.line += 1;
                                }
                                w.push(ch);
                            }
                        }
                    }
                }
                '\\' => {
                    self.chars.next();
                    match self.chars.next() {
                        Some('\n') => self.line += 1,
                        Some(e) => {
                            started = true;
                            w.push(e);
                        }
                        None => {}
                    }
                }
                ';' | '#' => break,
                c if c.is_whitespace() => break,
                c => {
                    self.chars.next();
                    started = true;
                    w.push(c);
                }
            }
        }
        Ok(started.then_some(w))
    }
}

fn valid_name(s: &str, dash: bool) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || (dash && c == '-'))
}

/// Reads UCI text into its sections (no schema: any types and options). Errors carry the line.
pub fn parse_sections(text: &str) -> Result<Vec<UciSection>, UciSyntaxError> {
    let mut lexer = Lexer {
        chars: text.chars().peekable(),
        line: 1,
    };
    let mut sections: Vec<UciSection> = Vec::new();
    let mut counts: HashMap<String, usize> = HashMap::new();
    let err = |line, message: String| UciSyntaxError { line, message };
    while let Some((line, words)) = lexer.statement()? {
        match words[0].as_str() {
            "package" => {
                if words.len() != 2 {
                    return Err(err(line, "`package` takes one name".into()));
                }
            }
            "config" => {
                if !(2..=3).contains(&words.len()) {
                    return Err(err(
                        line,
                        "expected `config <type> ['<name>']`".to_owned()
                            + if words.len() > 3 { " (too many words)" } else { "" },
                    ));
                }
                let section_type = words[1].clone();
                if !valid_name(&section_type, true) {
                    return Err(err(
                        line,
                        format!("invalid section type {section_type:?}: use letters, digits, '_' and '-'"),
                    ));
                }
                let name = words.get(2).filter(|n| !n.is_empty()).cloned();
                if let Some(n) = &name {
                    if !valid_name(n, false) {
                        return Err(err(
                            line,
                            format!("invalid section name {n:?}: use letters, digits and '_'"),
                        ));
                    }
                }
                let count = counts.entry(section_type.clone()).or_default();
                sections.push(UciSection {
                    section_type,
                    name,
                    index: *count,
                    line,
                    entries: Vec::new(),
                });
                *count += 1;
            }
            kw @ ("option" | "list") => {
                if words.len() != 3 {
                    return Err(err(
                        line,
                        format!(
                            "expected `{kw} <name> '<value>'`{}",
                            if words.len() > 3 {
                                " (too many words; quote a value that contains blanks)"
                            } else {
                                ""
                            }
                        ),
                    ));
                }
                if !valid_name(&words[1], false) {
                    return Err(err(
                        line,
                        format!("invalid option name {:?}: use letters, digits and '_'", words[1]),
                    ));
                }
                let Some(section) = sections.last_mut() else {
                    return Err(err(line, format!("`{kw}` before the first `config` section")));
                };
                section.entries.push(UciEntry {
                    name: words[1].clone(),
                    value: words[2].clone(),
                    list: kw == "list",
                    line,
                });
            }
            other => {
                return Err(err(
                    line,
                    format!("unknown statement {other:?}; expected package, config, option or list"),
                ))
            }
        }
    }
    Ok(sections)
}

impl fmt::Display for UciSection {
    /// `config rule 'bittorrent' (line 12)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "config {} {} (line {})",
            self.section_type,
            self.label(),
            self.line
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(text: &str) -> UciSection {
        let mut s = parse_sections(text).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(s.len(), 1);
        s.remove(0)
    }

    #[test]
    fn quoting_and_escapes() {
        let s = one(concat!(
            "config t 'n'\n",
            "  option a 'single \\ quoted # not a comment'\n",
            "  option b \"double \\\"q\\\" \\\\ back\"\n",
            "  option c unquoted\\ blank # comment\n",
            "  option d 'a'\"b\"c\n",
            "  option e ''\n",
            "  option f 'two\nlines'\n",
            "  option g long\\\n",
            "value\n",
            "  option h x; option i y\n",
        ));
        let v = |n: &str| s.option(n).unwrap();
        assert_eq!(v("a"), "single \\ quoted # not a comment");
        assert_eq!(v("b"), "double \"q\" \\ back");
        assert_eq!(v("c"), "unquoted blank");
        assert_eq!(v("d"), "abc");
        assert_eq!(v("e"), "");
        assert_eq!(v("f"), "two\nlines");
        assert_eq!(v("g"), "longvalue");
        assert_eq!(v("h"), "x");
        assert_eq!(v("i"), "y");
        let lines: Vec<usize> = s.entries.iter().map(|e| e.line).collect();
        assert_eq!(lines, [2, 3, 4, 5, 6, 7, 9, 11, 11]);
    }

    #[test]
    fn lists_and_overrides() {
        let s = one("config t\n option x 1\n option x 2\n list y a\n list y b\n option z p\n list z q\n");
        assert_eq!(s.name, None);
        assert_eq!(s.label(), "@t[0]");
        assert_eq!(s.option("x").unwrap(), "2");
        assert_eq!(s.values("y").unwrap(), ["a", "b"]);
        assert_eq!(s.values("z").unwrap(), ["p", "q"]);
        assert_eq!(s.values("nope"), None);
    }

    #[test]
    fn syntax_errors_name_the_line() {
        for (text, line, what) in [
            ("config t\n option a 'open\n", 2, "unterminated ' quote"),
            ("config t\n option a \"open\n", 2, "unterminated \" quote"),
            ("option a b\n", 1, "before the first `config`"),
            ("config t\n option a\n", 2, "expected `option <name> '<value>'`"),
            ("config t\n option a b c\n", 2, "too many words"),
            ("config t\n list a-b c\n", 2, "invalid option name"),
            ("config t 'a-b'\n", 1, "invalid section name"),
            ("config\n", 1, "expected `config <type>"),
            ("\n\nconfig t\n foo a b\n", 4, "unknown statement \"foo\""),
        ] {
            let e = parse_sections(text).unwrap_err();
            assert_eq!(e.line, line, "{text:?}: {e}");
            assert!(e.message.contains(what), "{text:?}: {e}");
        }
    }

    #[test]
    fn booleans() {
        for t in ["1", "yes", "on", "true", "TRUE", "enabled"] {
            assert_eq!(parse_bool(t), Some(true), "{t}");
        }
        for f in ["0", "no", "off", "false", "disabled"] {
            assert_eq!(parse_bool(f), Some(false), "{f}");
        }
        assert_eq!(parse_bool("2"), None);
    }
}
