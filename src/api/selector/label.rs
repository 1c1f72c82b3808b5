//! Label selectors: the grammar and matching rules of `kubernetes/apimachinery:
//! pkg/labels/selector.go` (lexer, recursive-descent parser, key and value validation).
//!
//! Grammar: a comma-separated AND of requirements, each `key`, `!key`, `key=v`, `key==v`,
//! `key!=v`, `key in (a,b)`, `key notin (a,b)`, `key>n` or `key<n`; blanks between tokens are
//! ignored. `!=` and `notin` also match objects without the key. One deliberate difference from
//! apimachinery: `key in ()` (no value at all) is an error here, where apimachinery reads it as
//! `key in ("")`; `(,)`, `(a,)` and `(a,,b)` keep apimachinery's meaning (they add `""`).

use std::collections::BTreeMap;

use super::{SelectorError, SelectorErrorKind, SelectorLang};

/// Longest label value and longest name part of a label key (apimachinery
/// `LabelValueMaxLength`, `QualifiedNameMaxLength`).
pub const LABEL_MAX_LEN: usize = 63;
/// Longest prefix of a label key (a DNS-1123 subdomain).
pub const PREFIX_MAX_LEN: usize = 253;

const NAME_CHARSET: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', \
                            and must start and end with an alphanumeric character";
const VALUE_CHARSET: &str = "must consist of alphanumeric characters, '-', '_' or '.', \
                             and must start and end with an alphanumeric character";

/// Read access to an object's labels, for matching: a `BTreeMap` or the compact
/// [`crate::cache::collection::LabelSet`] of a served object.
pub trait LabelLookup {
    /// The value of label `key`, if the object has it.
    fn label(&self, key: &str) -> Option<&str>;
}

impl LabelLookup for BTreeMap<String, String> {
    fn label(&self, key: &str) -> Option<&str> {
        self.get(key).map(String::as_str)
    }
}

/// A parsed label selector. The default (and `parse("")`) has no requirement and matches
/// every object.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LabelSelector {
    /// Requirements, stably sorted by key as apimachinery does.
    reqs: Vec<Requirement>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Requirement {
    key: String,
    op: Op,
}

/// The operator of one requirement. `=`/`==` become `In` with one value and `!=` becomes
/// `NotIn` with one value: the matching rules are identical. Value lists are sorted, deduplicated.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Op {
    Exists,
    DoesNotExist,
    In(Vec<String>),
    NotIn(Vec<String>),
    Gt(i64),
    Lt(i64),
}

impl LabelSelector {
    /// Parses a decoded `labelSelector` value. Blank input selects everything.
    pub fn parse(s: &str) -> Result<LabelSelector, SelectorError> {
        let mut p = Parser {
            toks: lex(s),
            pos: 0,
            input: s,
        };
        let mut reqs = Vec::new();
        loop {
            match p.peek() {
                Tok::Ident(_) | Tok::Bang => {
                    reqs.push(p.requirement()?);
                    match p.next() {
                        Tok::End => break,
                        Tok::Comma => match p.peek() {
                            Tok::Ident(_) | Tok::Bang => {}
                            t => return Err(p.syntax(t, "identifier after ','")),
                        },
                        t => return Err(p.syntax(t, "',' or 'end of string'")),
                    }
                }
                Tok::End => break,
                t => return Err(p.syntax(t, "!, identifier, or 'end of string'")),
            }
        }
        reqs.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(LabelSelector { reqs })
    }

    /// Whether an object with these labels is selected (every requirement holds).
    pub fn matches<L: LabelLookup + ?Sized>(&self, labels: &L) -> bool {
        self.reqs.iter().all(|r| r.matches(labels))
    }

    /// Whether the selector has no requirement (selects everything).
    pub fn is_empty(&self) -> bool {
        self.reqs.is_empty()
    }

    /// Whether every requirement is `!key` (DoesNotExist) for a key in `keys` (true for the
    /// empty selector): then the selector selects exactly the objects that carry none of `keys`.
    pub fn only_absence_of(&self, keys: &[&str]) -> bool {
        self.reqs
            .iter()
            .all(|r| r.op == Op::DoesNotExist && keys.contains(&r.key.as_str()))
    }
}

impl Requirement {
    fn matches<L: LabelLookup + ?Sized>(&self, labels: &L) -> bool {
        let value = labels.label(&self.key);
        let among = |vals: &[String], v: &str| vals.binary_search_by(|x| x.as_str().cmp(v)).is_ok();
        match &self.op {
            Op::Exists => value.is_some(),
            Op::DoesNotExist => value.is_none(),
            Op::In(vals) => value.is_some_and(|v| among(vals, v)),
            Op::NotIn(vals) => value.is_none_or(|v| !among(vals, v)),
            Op::Gt(n) => int_value(value).is_some_and(|v| v > *n),
            Op::Lt(n) => int_value(value).is_some_and(|v| v < *n),
        }
    }
}

/// A label value read as a decimal integer, as `strconv.ParseInt(v, 10, 64)` would.
fn int_value(value: Option<&str>) -> Option<i64> {
    value.and_then(|v| v.parse::<i64>().ok())
}

/// A lexer token. `in` and `notin` are identifiers; the parser gives them meaning only where an
/// operator is expected (so `in in (in)` is a valid requirement, as in apimachinery).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tok<'a> {
    End,
    Comma,
    Bang,
    Eq,
    EqEq,
    NotEq,
    Gt,
    Lt,
    Open,
    Close,
    Ident(&'a str),
}

impl Tok<'_> {
    fn text(&self) -> &str {
        match self {
            Tok::End => "end of string",
            Tok::Comma => ",",
            Tok::Bang => "!",
            Tok::Eq => "=",
            Tok::EqEq => "==",
            Tok::NotEq => "!=",
            Tok::Gt => ">",
            Tok::Lt => "<",
            Tok::Open => "(",
            Tok::Close => ")",
            Tok::Ident(s) => s,
        }
    }
}

fn is_blank(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\r' | b'\n')
}

fn is_special(c: u8) -> bool {
    matches!(c, b'=' | b'!' | b'(' | b')' | b',' | b'>' | b'<')
}

/// Splits the input into tokens; always ends with `Tok::End`. Identifiers run until a blank or
/// a special character, so they are cut at ASCII positions (always char boundaries).
fn lex(s: &str) -> Vec<Tok<'_>> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    loop {
        while b.get(i).is_some_and(|&c| is_blank(c)) {
            i += 1;
        }
        let Some(&c) = b.get(i) else {
            out.push(Tok::End);
            return out;
        };
        if is_special(c) {
            let (tok, len) = match (c, b.get(i + 1)) {
                (b'!', Some(b'=')) => (Tok::NotEq, 2),
                (b'=', Some(b'=')) => (Tok::EqEq, 2),
                (b'!', _) => (Tok::Bang, 1),
                (b'=', _) => (Tok::Eq, 1),
                (b'(', _) => (Tok::Open, 1),
                (b')', _) => (Tok::Close, 1),
                (b',', _) => (Tok::Comma, 1),
                (b'>', _) => (Tok::Gt, 1),
                _ => (Tok::Lt, 1),
            };
            out.push(tok);
            i += len;
        } else {
            let start = i;
            while b.get(i).is_some_and(|&c| !is_blank(c) && !is_special(c)) {
                i += 1;
            }
            out.push(Tok::Ident(s.get(start..i).unwrap_or("")));
        }
    }
}

struct Parser<'a> {
    toks: Vec<Tok<'a>>,
    pos: usize,
    input: &'a str,
}

impl<'a> Parser<'a> {
    fn peek(&self) -> Tok<'a> {
        self.toks.get(self.pos).copied().unwrap_or(Tok::End)
    }

    fn next(&mut self) -> Tok<'a> {
        let t = self.peek();
        if self.pos < self.toks.len() {
            self.pos += 1;
        }
        t
    }

    fn err(&self, kind: SelectorErrorKind) -> SelectorError {
        SelectorError::new(SelectorLang::Label, self.input, kind)
    }

    fn syntax(&self, found: Tok<'_>, expected: &'static str) -> SelectorError {
        self.err(SelectorErrorKind::Syntax {
            found: found.text().to_string(),
            expected,
        })
    }

    fn requirement(&mut self) -> Result<Requirement, SelectorError> {
        let mut t = self.next();
        let negated = t == Tok::Bang;
        if negated {
            t = self.next();
        }
        let Tok::Ident(key) = t else {
            return Err(self.syntax(t, "identifier"));
        };
        if let Err(reason) = validate_key(key) {
            return Err(self.err(SelectorErrorKind::InvalidKey {
                key: key.to_string(),
                reason,
            }));
        }
        if matches!(self.peek(), Tok::End | Tok::Comma) {
            let op = if negated {
                Op::DoesNotExist
            } else {
                Op::Exists
            };
            return Ok(Requirement {
                key: key.to_string(),
                op,
            });
        }
        if negated {
            return Err(self.syntax(self.peek(), "',' or 'end of string'"));
        }
        let op = match self.next() {
            Tok::Ident("in") => Op::In(self.value_set(key)?),
            Tok::Ident("notin") => Op::NotIn(self.value_set(key)?),
            Tok::Eq | Tok::EqEq => Op::In(vec![self.exact_value(key)?]),
            Tok::NotEq => Op::NotIn(vec![self.exact_value(key)?]),
            Tok::Gt => Op::Gt(self.int_value(key)?),
            Tok::Lt => Op::Lt(self.int_value(key)?),
            t => return Err(self.syntax(t, "'=', '!=', '==', 'in', 'notin', '>' or '<'")),
        };
        Ok(Requirement {
            key: key.to_string(),
            op,
        })
    }

    /// The value after `=`, `==` or `!=`; nothing before `,` / end means `""`.
    fn exact_value(&mut self, key: &str) -> Result<String, SelectorError> {
        let value = match self.peek() {
            Tok::End | Tok::Comma => "",
            _ => match self.next() {
                Tok::Ident(v) => v,
                t => return Err(self.syntax(t, "identifier")),
            },
        };
        self.check_value(key, value)?;
        Ok(value.to_string())
    }

    /// The integer after `>` or `<`.
    fn int_value(&mut self, key: &str) -> Result<i64, SelectorError> {
        let value = self.exact_value(key)?;
        value.parse::<i64>().map_err(|_| {
            self.err(SelectorErrorKind::NotAnInteger {
                key: key.to_string(),
                value,
            })
        })
    }

    /// `( v, … )` after `in` / `notin`: sorted, deduplicated, validated values.
    fn value_set(&mut self, key: &str) -> Result<Vec<String>, SelectorError> {
        match self.next() {
            Tok::Open => {}
            t => return Err(self.syntax(t, "'('")),
        }
        let mut vals: Vec<&str> = match self.peek() {
            Tok::Ident(_) | Tok::Comma => {
                let vals = self.identifier_list()?;
                match self.next() {
                    Tok::Close => vals,
                    t => return Err(self.syntax(t, "')'")),
                }
            }
            Tok::Close => {
                return Err(self.err(SelectorErrorKind::EmptyValueSet {
                    key: key.to_string(),
                }))
            }
            t => return Err(self.syntax(t, "',', ')' or identifier")),
        };
        vals.sort_unstable();
        vals.dedup();
        for v in &vals {
            self.check_value(key, v)?;
        }
        Ok(vals.into_iter().map(str::to_string).collect())
    }

    /// apimachinery's `parseIdentifiersList`, including its reading of empty items:
    /// `(,a)`, `(a,)` and `(a,,b)` each add `""`. Stops before the closing `)`.
    fn identifier_list(&mut self) -> Result<Vec<&'a str>, SelectorError> {
        let mut vals = Vec::new();
        loop {
            match self.next() {
                Tok::Ident(v) => {
                    vals.push(v);
                    match self.peek() {
                        Tok::Comma => {}
                        Tok::Close => return Ok(vals),
                        t => return Err(self.syntax(t, "',' or ')'")),
                    }
                }
                Tok::Comma => {
                    if vals.is_empty() {
                        vals.push("");
                    }
                    match self.peek() {
                        Tok::Close => {
                            vals.push("");
                            return Ok(vals);
                        }
                        Tok::Comma => {
                            self.next();
                            vals.push("");
                        }
                        _ => {}
                    }
                }
                t => return Err(self.syntax(t, "',' or identifier")),
            }
        }
    }

    fn check_value(&self, key: &str, value: &str) -> Result<(), SelectorError> {
        validate_value(value).map_err(|reason| {
            self.err(SelectorErrorKind::InvalidValue {
                key: key.to_string(),
                value: value.to_string(),
                reason,
            })
        })
    }
}

/// `[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?` (the name part of a qualified name and every
/// non-empty label value).
fn is_name_like(s: &str) -> bool {
    let b = s.as_bytes();
    let alnum_ends = b.first().is_some_and(u8::is_ascii_alphanumeric)
        && b.last().is_some_and(u8::is_ascii_alphanumeric);
    alnum_ends
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

/// A lowercase RFC 1123 subdomain: dot-separated non-empty parts of `[a-z0-9-]`, each starting
/// and ending with `[a-z0-9]`, at most [`PREFIX_MAX_LEN`] bytes in all.
fn is_dns1123_subdomain(s: &str) -> bool {
    let part_ok = |p: &str| {
        let b = p.as_bytes();
        let end_ok = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
        b.first().is_some_and(end_ok)
            && b.last().is_some_and(end_ok)
            && b.iter().all(|c| end_ok(c) || *c == b'-')
    };
    s.len() <= PREFIX_MAX_LEN && s.split('.').all(part_ok)
}

/// apimachinery `IsQualifiedName`: `[prefix/]name`.
fn validate_key(key: &str) -> Result<(), &'static str> {
    let mut parts = key.split('/');
    let (prefix, name) = match (parts.next(), parts.next(), parts.next()) {
        (Some(name), None, _) => (None, name),
        (Some(prefix), Some(name), None) => (Some(prefix), name),
        _ => return Err("a qualified name may contain at most one '/'"),
    };
    match prefix {
        Some("") => return Err("prefix part must be non-empty"),
        Some(p) if !is_dns1123_subdomain(p) => {
            return Err(
                "prefix part must be a lowercase RFC 1123 subdomain of at most 253 \
                        characters (e.g. 'example.com')",
            )
        }
        _ => {}
    }
    if name.is_empty() {
        Err("name part must be non-empty")
    } else if name.len() > LABEL_MAX_LEN {
        Err("name part must be no more than 63 characters")
    } else if !is_name_like(name) {
        Err(NAME_CHARSET)
    } else {
        Ok(())
    }
}

/// apimachinery `IsValidLabelValue`: empty, or at most 63 name-like characters.
fn validate_value(value: &str) -> Result<(), &'static str> {
    if value.len() > LABEL_MAX_LEN {
        Err("must be no more than 63 characters")
    } else if !value.is_empty() && !is_name_like(value) {
        Err(VALUE_CHARSET)
    } else {
        Ok(())
    }
}

#[cfg(test)]
#[path = "label_tests.rs"]
mod tests;
