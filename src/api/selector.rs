//! Label and field selectors (docs/SEMANTICS.md §1): parsing and matching. Pure.
//!
//! This module owns the two selector languages of `kubernetes/apimachinery`
//! (`pkg/labels/selector.go` and `pkg/fields/selector.go`): it turns the decoded
//! `labelSelector` / `fieldSelector` query values into matchers and evaluates them against an
//! object's labels or fields. It knows nothing about HTTP or the cache: the caller passes the
//! field names a resource supports and a getter for the object's field values.

mod field;
mod label;

pub use field::FieldSelector;
pub use label::{LabelLookup, LabelSelector};

use std::fmt;

/// Longest prefix of the offending selector text kept in a [`SelectorError`] (bytes), so that an
/// error message built from a huge query stays small.
pub const MAX_ERROR_INPUT_LEN: usize = 256;

/// Which selector language an error is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SelectorLang {
    /// `labelSelector`.
    Label,
    /// `fieldSelector`.
    Field,
}

/// What is wrong with a selector.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SelectorErrorKind {
    /// Label selector syntax: `found` (a token, or `end of string`) where `expected` belonged.
    Syntax {
        /// The token found, as written.
        found: String,
        /// What the grammar allows at that point.
        expected: &'static str,
    },
    /// A label key that is not a qualified name (optional DNS-1123 subdomain prefix and `/`,
    /// then a name of at most 63 characters of `[A-Za-z0-9-_.]`, alphanumeric at both ends).
    InvalidKey {
        /// The key as written.
        key: String,
        /// Which rule it breaks.
        reason: &'static str,
    },
    /// A label value that is not valid (at most 63 characters of `[A-Za-z0-9-_.]`,
    /// alphanumeric at both ends, or empty).
    InvalidValue {
        /// The key the value belongs to.
        key: String,
        /// The value as written.
        value: String,
        /// Which rule it breaks.
        reason: &'static str,
    },
    /// `key in ()` / `key notin ()`: a set requirement without any value.
    EmptyValueSet {
        /// The key of the requirement.
        key: String,
    },
    /// `key > v` / `key < v` where `v` is not a decimal integer.
    NotAnInteger {
        /// The key of the requirement.
        key: String,
        /// The value as written.
        value: String,
    },
    /// A field selector term with no `=`, `==` or `!=`.
    NoOperator {
        /// The term as written.
        term: String,
    },
    /// A backslash escape other than `\\`, `\,` or `\=` in a field selector value (or a value
    /// ending in a lone backslash).
    InvalidEscape {
        /// The offending sequence, e.g. `\n`.
        sequence: String,
    },
    /// An unescaped `,` or `=` inside a field selector value.
    UnescapedChar {
        /// The character.
        ch: char,
    },
    /// A field the resource does not support.
    UnsupportedField {
        /// The field name as written.
        field: String,
    },
}

/// A selector that could not be parsed. `Display` names the bad input; the message for an
/// unsupported field is exactly `field label not supported: <field>`, as the apiserver says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SelectorError {
    lang: SelectorLang,
    /// The selector text (at most [`MAX_ERROR_INPUT_LEN`] bytes of it).
    input: String,
    kind: SelectorErrorKind,
}

impl SelectorError {
    pub(crate) fn new(lang: SelectorLang, input: &str, kind: SelectorErrorKind) -> Self {
        SelectorError {
            lang,
            input: truncate(input, MAX_ERROR_INPUT_LEN).to_string(),
            kind,
        }
    }

    /// What is wrong.
    pub fn kind(&self) -> &SelectorErrorKind {
        &self.kind
    }

    /// Which selector language the error is about.
    pub fn lang(&self) -> SelectorLang {
        self.lang
    }
}

/// The longest prefix of `s` of at most `max` bytes that ends on a character boundary.
fn truncate(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s.get(..end).unwrap_or("")
}

impl fmt::Display for SelectorError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use SelectorErrorKind as K;
        if let K::UnsupportedField { field } = &self.kind {
            return write!(f, "field label not supported: {field}");
        }
        let lang = match self.lang {
            SelectorLang::Label => "label",
            SelectorLang::Field => "field",
        };
        write!(f, "unable to parse {lang} selector {:?}: ", self.input)?;
        let t = |s: &str| truncate(s, MAX_ERROR_INPUT_LEN).to_string();
        match &self.kind {
            K::Syntax { found, expected } => {
                write!(f, "found '{}', expected: {expected}", t(found))
            }
            K::InvalidKey { key, reason } => write!(f, "invalid label key {:?}: {reason}", t(key)),
            K::InvalidValue { key, value, reason } => write!(
                f,
                "invalid label value {:?} for key {:?}: {reason}",
                t(value),
                t(key)
            ),
            K::EmptyValueSet { key } => write!(
                f,
                "for 'in', 'notin' operators, values set can't be empty (key {:?})",
                t(key)
            ),
            K::NotAnInteger { key, value } => write!(
                f,
                "for 'gt', 'lt' operators, the value must be an integer (key {:?}, value {:?})",
                t(key),
                t(value)
            ),
            K::NoOperator { term } => write!(
                f,
                "can't understand {:?}: expected field=value, field==value or field!=value",
                t(term)
            ),
            K::InvalidEscape { sequence } => write!(f, "invalid escape sequence: {sequence}"),
            K::UnescapedChar { ch } => write!(f, "unescaped character in value: {ch:?}"),
            K::UnsupportedField { field } => write!(f, "field label not supported: {field}"),
        }
    }
}

impl std::error::Error for SelectorError {}
