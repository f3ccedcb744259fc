//! Key patterns: the glob syntax of Accurate's `labelKeys`, `annotationKeys` and the
//! `propagate*KeyExcludes` lists.
//!
//! Accurate matches keys with Go's `path.Match`, so Arbor implements the same language, and a
//! configuration written for Accurate selects the same keys here:
//!
//! | pattern | matches |
//! |---|---|
//! | `*` | any run of characters except `/` (so `*` alone never matches a prefixed key) |
//! | `?` | one character except `/` |
//! | `[a-z]`, `[^0-9]` | one character in (or not in) the class |
//! | `\c` | the character `c` itself |
//! | any other character | itself |
//!
//! A pattern always has to match the whole key: `*.example.com/*` matches
//! `team.example.com/owner` but not `example.com/owner`.

use std::fmt;

/// Why a key pattern cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed key pattern {pattern:?}: {reason}")]
pub struct PatternError {
    pub pattern: String,
    pub reason: &'static str,
}

/// One parsed glob pattern over label or annotation keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyPattern {
    source: String,
    tokens: Vec<Token>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Literal(char),
    AnySegmentRun,
    AnySegmentChar,
    Class {
        negated: bool,
        ranges: Vec<(char, char)>,
    },
}

impl KeyPattern {
    /// Parses `pattern`, refusing what Go's `path.Match` calls a bad pattern.
    pub fn parse(pattern: &str) -> Result<Self, PatternError> {
        let error = |reason| PatternError {
            pattern: pattern.to_owned(),
            reason,
        };
        let mut tokens = Vec::new();
        let mut chars = pattern.chars().peekable();
        while let Some(c) = chars.next() {
            let token = match c {
                '*' => Token::AnySegmentRun,
                '?' => Token::AnySegmentChar,
                '\\' => Token::Literal(chars.next().ok_or_else(|| error("trailing backslash"))?),
                '[' => {
                    let negated = chars.next_if_eq(&'^').is_some();
                    let mut ranges = Vec::new();
                    loop {
                        let lo = match chars.next() {
                            None => return Err(error("unterminated character class")),
                            Some(']') if !ranges.is_empty() => break,
                            Some(']') => return Err(error("empty character class")),
                            Some('-') => return Err(error("character range without a lower end")),
                            Some('\\') => {
                                chars.next().ok_or_else(|| error("trailing backslash"))?
                            }
                            Some(c) => c,
                        };
                        let hi = if chars.next_if_eq(&'-').is_some() {
                            match chars.next() {
                                None | Some(']') => {
                                    return Err(error("character range without an upper end"));
                                }
                                Some('\\') => {
                                    chars.next().ok_or_else(|| error("trailing backslash"))?
                                }
                                Some(c) => c,
                            }
                        } else {
                            lo
                        };
                        if lo > hi {
                            return Err(error("character range runs backwards"));
                        }
                        ranges.push((lo, hi));
                    }
                    Token::Class { negated, ranges }
                }
                c => Token::Literal(c),
            };
            tokens.push(token);
        }
        Ok(Self {
            source: pattern.to_owned(),
            tokens,
        })
    }

    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.source
    }

    /// Whether the whole of `key` matches.
    pub fn matches(&self, key: &str) -> bool {
        let key: Vec<char> = key.chars().collect();
        // matched[j]: the tokens seen so far can match exactly the first j characters.
        let mut matched = vec![false; key.len() + 1];
        matched[0] = true;
        for token in &self.tokens {
            let mut next = vec![false; key.len() + 1];
            match token {
                Token::AnySegmentRun => {
                    for j in 0..=key.len() {
                        next[j] = matched[j] || (j > 0 && next[j - 1] && key[j - 1] != '/');
                    }
                }
                single => {
                    for j in 1..=key.len() {
                        next[j] = matched[j - 1] && single.matches_char(key[j - 1]);
                    }
                }
            }
            matched = next;
        }
        matched[key.len()]
    }
}

impl Token {
    fn matches_char(&self, c: char) -> bool {
        match self {
            Token::Literal(l) => *l == c,
            Token::AnySegmentChar => c != '/',
            Token::Class { negated, ranges } => {
                ranges.iter().any(|(lo, hi)| (*lo..=*hi).contains(&c)) != *negated
            }
            Token::AnySegmentRun => unreachable!("runs are matched by the caller"),
        }
    }
}

impl fmt::Display for KeyPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)
    }
}

/// A list of patterns; a key is selected when any of them matches.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeyPatterns(Vec<KeyPattern>);

impl KeyPatterns {
    /// Parses every pattern, failing on the first malformed one.
    pub fn parse<S: AsRef<str>>(patterns: &[S]) -> Result<Self, PatternError> {
        patterns
            .iter()
            .map(|p| KeyPattern::parse(p.as_ref()))
            .collect::<Result<_, _>>()
            .map(Self)
    }

    pub fn matches(&self, key: &str) -> bool {
        self.0.iter().any(|p| p.matches(key))
    }

    pub fn iter(&self) -> impl Iterator<Item = &KeyPattern> {
        self.0.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matches(pattern: &str, key: &str) -> bool {
        KeyPattern::parse(pattern).unwrap().matches(key)
    }

    #[test]
    fn literal_pattern_matches_only_itself() {
        assert!(matches("team", "team"));
        assert!(!matches("team", "teams"));
        assert!(!matches("team", "x/team"));
    }

    #[test]
    fn star_matches_within_one_segment() {
        assert!(matches("*.example.com/*", "team.example.com/owner"));
        assert!(matches("*.example.com/*", "a.b.example.com/"));
        assert!(!matches("*.example.com/*", "example.com/owner"));
        assert!(!matches("*", "example.com/owner"));
        assert!(matches("*/*", "example.com/owner"));
        assert!(matches("*kubernetes.io/*", "app.kubernetes.io/name"));
    }

    #[test]
    fn question_mark_and_classes_match_one_character() {
        assert!(matches("tier-?", "tier-1"));
        assert!(!matches("tier-?", "tier-12"));
        assert!(!matches("a?b", "a/b"));
        assert!(matches("tier-[0-9]", "tier-7"));
        assert!(!matches("tier-[^0-9]", "tier-7"));
        assert!(matches("tier-[^0-9]", "tier-x"));
    }

    #[test]
    fn backslash_escapes_a_metacharacter() {
        assert!(matches(r"a\*b", "a*b"));
        assert!(!matches(r"a\*b", "axb"));
    }

    #[test]
    fn malformed_patterns_are_refused() {
        for bad in ["[", "[]", "a\\", "[z-a]", "[a-]", "[-a]"] {
            assert!(KeyPattern::parse(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn any_pattern_of_a_list_selects_a_key() {
        let list = KeyPatterns::parse(&["team", "*.example.com/*"]).unwrap();
        assert!(list.matches("team"));
        assert!(list.matches("x.example.com/y"));
        assert!(!list.matches("owner"));
        assert!(!KeyPatterns::default().matches("team"));
    }
}
