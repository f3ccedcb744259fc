//! Parsing one file into its objects: multi-document YAML (`.yaml`, `.yml`) or JSON (`.json`).

use arbor_policy::layout::{ErrorCode, SourceError};
use serde_json::Value;

/// The kind of file, by extension; other files are not part of the declared state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Yaml,
    Json,
}

impl Format {
    /// The format of a file name, or `None` for files a source does not read.
    pub fn of(file_name: &str) -> Option<Self> {
        let (_, extension) = file_name.rsplit_once('.')?;
        match extension.to_ascii_lowercase().as_str() {
            "yaml" | "yml" => Some(Self::Yaml),
            "json" => Some(Self::Json),
            _ => None,
        }
    }
}

/// The documents of a file, empty and null documents dropped. `path` only names the file in
/// errors.
pub fn parse_documents(
    path: &str,
    format: Format,
    bytes: &[u8],
) -> Result<Vec<Value>, SourceError> {
    let malformed = |line: Option<u64>, message: String| {
        SourceError::at_path(ErrorCode::MalformedFile, path, message).with_line(line)
    };
    let text = std::str::from_utf8(bytes).map_err(|e| {
        malformed(
            Some(line_of_offset(bytes, e.valid_up_to())),
            format!("the file is not UTF-8: {e}"),
        )
    })?;
    match format {
        Format::Json => {
            if text.trim().is_empty() {
                return Ok(Vec::new());
            }
            let value: Value = serde_json::from_str(text)
                .map_err(|e| malformed(Some(e.line() as u64), format!("invalid JSON: {e}")))?;
            Ok(if value.is_null() {
                Vec::new()
            } else {
                vec![value]
            })
        }
        Format::Yaml => serde_saphyr::from_multiple::<Value>(text)
            .map(|documents| documents.into_iter().filter(|d| !d.is_null()).collect())
            .map_err(|e| {
                let line = e.location().map(|l| l.line());
                malformed(
                    line,
                    format!("invalid YAML: {}", first_line(&e.to_string())),
                )
            }),
    }
}

fn line_of_offset(bytes: &[u8], offset: usize) -> u64 {
    1 + bytes[..offset].iter().filter(|&&b| b == b'\n').count() as u64
}

/// The parser's message without the source snippet it may append.
fn first_line(message: &str) -> &str {
    message.lines().next().unwrap_or(message).trim()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn format_follows_the_extension() {
        assert_eq!(Format::of("a.yaml"), Some(Format::Yaml));
        assert_eq!(Format::of("a.YML"), Some(Format::Yaml));
        assert_eq!(Format::of("a.json"), Some(Format::Json));
        assert_eq!(Format::of("README.md"), None);
        assert_eq!(Format::of("Makefile"), None);
    }

    #[test]
    fn multi_document_yaml_yields_every_object_and_skips_empty_ones() {
        let yaml = "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  n: \"1\"\n---\n---\n# only a comment\n---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: b\n";
        let docs = parse_documents("a.yaml", Format::Yaml, yaml.as_bytes()).unwrap();
        assert_eq!(docs.len(), 2);
        assert_eq!(docs[0]["data"]["n"], json!("1"));
        assert_eq!(docs[1]["kind"], json!("Secret"));
    }

    #[test]
    fn yaml_scalars_keep_their_types() {
        let yaml = "a: 1\nb: \"1\"\nc: true\nd: 1.5\ne: null\nf: [x, 2]\n";
        let docs = parse_documents("a.yaml", Format::Yaml, yaml.as_bytes()).unwrap();
        assert_eq!(
            docs[0],
            json!({"a": 1, "b": "1", "c": true, "d": 1.5, "e": null, "f": ["x", 2]})
        );
    }

    #[test]
    fn malformed_yaml_names_file_and_line() {
        let yaml = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: [unclosed\n";
        let error = parse_documents("dir/bad.yaml", Format::Yaml, yaml.as_bytes()).unwrap_err();
        assert_eq!(error.code, ErrorCode::MalformedFile);
        assert_eq!(error.path, "dir/bad.yaml");
        assert!(error.line.is_some_and(|l| l >= 4), "{error}");
        assert!(!error.message.contains('\n'));
    }

    #[test]
    fn malformed_json_names_the_line() {
        let error = parse_documents("a.json", Format::Json, b"{\n  \"a\": 1,\n}\n").unwrap_err();
        assert_eq!(
            (error.code, error.line),
            (ErrorCode::MalformedFile, Some(3))
        );
    }

    #[test]
    fn non_utf8_file_is_malformed() {
        let error = parse_documents("a.yaml", Format::Yaml, b"a: 1\nb: \xff\n").unwrap_err();
        assert_eq!(
            (error.code, error.line),
            (ErrorCode::MalformedFile, Some(2))
        );
    }

    #[test]
    fn empty_files_declare_nothing() {
        assert!(
            parse_documents("a.yaml", Format::Yaml, b"")
                .unwrap()
                .is_empty()
        );
        assert!(
            parse_documents("a.json", Format::Json, b"  \n")
                .unwrap()
                .is_empty()
        );
    }
}
