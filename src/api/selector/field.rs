//! Field selectors: the grammar of `kubernetes/apimachinery: pkg/fields/selector.go`
//! (`ParseSelector`, `splitTerms`, `splitTerm`, `UnescapeValue`) plus the apiserver's check
//! that every field is one the resource supports.
//!
//! A selector is a comma-separated AND of `field=value`, `field==value` or `field!=value`.
//! Commas inside a value are escaped as `\,`; `\=` and `\\` escape `=` and `\`; any other
//! escape, or an unescaped `=` / `,` inside a value, is an error. Empty terms (`a=b,,c=d`) are
//! skipped and nothing is trimmed, exactly as apimachinery does.

use super::{SelectorError, SelectorErrorKind, SelectorLang};

/// A parsed field selector. The default (and `parse("", _)`) has no term and matches
/// every object.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FieldSelector {
    terms: Vec<Term>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Term {
    field: String,
    /// `true` for `!=`.
    negated: bool,
    /// The unescaped value.
    value: String,
}

impl FieldSelector {
    /// Parses a decoded `fieldSelector` value. `supported`: the field names allowed for the
    /// resource (see `Resource::selectable_fields`); any other field is an error whose message
    /// is exactly `field label not supported: <field>`.
    pub fn parse(s: &str, supported: &[&str]) -> Result<FieldSelector, SelectorError> {
        let err = |kind| SelectorError::new(SelectorLang::Field, s, kind);
        let mut terms = Vec::new();
        for part in split_terms(s) {
            if part.is_empty() {
                continue;
            }
            let Some((field, negated, raw)) = split_term(part) else {
                return Err(err(SelectorErrorKind::NoOperator {
                    term: part.to_string(),
                }));
            };
            let value = unescape(raw).map_err(err)?;
            if !supported.contains(&field) {
                return Err(err(SelectorErrorKind::UnsupportedField {
                    field: field.to_string(),
                }));
            }
            terms.push(Term {
                field: field.to_string(),
                negated,
                value,
            });
        }
        terms.sort_by(|a, b| a.field.cmp(&b.field));
        Ok(FieldSelector { terms })
    }

    /// Whether an object is selected. `get(field)` returns the object's value of a field;
    /// `None` counts as `""`, as in the apiserver's field sets.
    pub fn matches<'a>(&self, get: impl Fn(&str) -> Option<&'a str>) -> bool {
        self.terms.iter().all(|t| {
            let actual = get(&t.field).unwrap_or("");
            (actual == t.value) != t.negated
        })
    }

    /// The value `v` if the selector requires `field == v` (written with `=` or `==`); used for
    /// direct lookups. With several such terms on one field the first is returned; the caller
    /// must still apply [`FieldSelector::matches`] to the object it finds.
    pub fn required(&self, field: &str) -> Option<&str> {
        self.terms
            .iter()
            .find(|t| !t.negated && t.field == field)
            .map(|t| t.value.as_str())
    }

    /// Whether the selector has no term (selects everything).
    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }
}

/// Splits at commas not preceded by a backslash escape; escapes stay in the terms.
fn split_terms(s: &str) -> Vec<&str> {
    let mut terms = Vec::new();
    if s.is_empty() {
        return terms;
    }
    let mut start = 0;
    let mut in_escape = false;
    for (i, c) in s.char_indices() {
        if in_escape {
            in_escape = false;
        } else if c == '\\' {
            in_escape = true;
        } else if c == ',' {
            terms.push(s.get(start..i).unwrap_or(""));
            start = i + 1;
        }
    }
    terms.push(s.get(start..).unwrap_or(""));
    terms
}

/// `(field, negated, raw value)` split at the first operator; at each position `!=` is tried
/// before `==` before `=`, so `a==b` never leaves `=` in the value.
fn split_term(term: &str) -> Option<(&str, bool, &str)> {
    for (i, _) in term.char_indices() {
        let rest = term.get(i..)?;
        let lhs = term.get(..i)?;
        for (op, negated) in [("!=", true), ("==", false), ("=", false)] {
            if let Some(rhs) = rest.strip_prefix(op) {
                return Some((lhs, negated, rhs));
            }
        }
    }
    None
}

/// apimachinery `UnescapeValue`.
fn unescape(raw: &str) -> Result<String, SelectorErrorKind> {
    let mut out = String::with_capacity(raw.len());
    let mut in_escape = false;
    for c in raw.chars() {
        if in_escape {
            match c {
                '\\' | ',' | '=' => out.push(c),
                _ => {
                    return Err(SelectorErrorKind::InvalidEscape {
                        sequence: format!("\\{c}"),
                    })
                }
            }
            in_escape = false;
            continue;
        }
        match c {
            '\\' => in_escape = true,
            ',' | '=' => return Err(SelectorErrorKind::UnescapedChar { ch: c }),
            _ => out.push(c),
        }
    }
    if in_escape {
        return Err(SelectorErrorKind::InvalidEscape {
            sequence: "\\".to_string(),
        });
    }
    Ok(out)
}

#[cfg(test)]
#[path = "field_tests.rs"]
mod tests;
