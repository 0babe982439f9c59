//! Benign arguments for any tool's input schema, and a home directory as
//! a developer's looks, for measuring the guard's secret check's false
//! alarms (issue 37). Shared by plumbline-guard's corpus test and the CLI's
//! test through the guard with published servers (included by `#[path]`).

#![allow(dead_code)] // each test uses a part

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

/// Benign strings by what an argument is for, three of each.
pub fn pool(name: &str, format: Option<&str>) -> [&'static str; 3] {
    let n = name.to_ascii_lowercase();
    let has = |words: &[&str]| words.iter().any(|w| n.contains(w));
    match format {
        Some("uri" | "url" | "uri-reference") => {
            return [
                "https://api.github.com/repos/octo/shop/pulls/42?state=open",
                "https://docs.aws.amazon.com/AmazonS3/latest/userguide/Welcome.html",
                "http://localhost:3000/api/v1/orders?page=2&per_page=50",
            ]
        }
        Some("date-time" | "date") => {
            return [
                "2026-12-06T10:00:00Z",
                "2025-01-31",
                "2026-07-28T23:59:59+02:00",
            ]
        }
        Some("email") => {
            return [
                "alice@example.com",
                "ops+alerts@shop.example",
                "bob.smith@corp.example",
            ]
        }
        _ => {}
    }
    if has(&["sql", "query"]) {
        [
            "SELECT id, email FROM users WHERE created_at > NOW() - INTERVAL '7 days' ORDER BY id LIMIT 50",
            "project = SHOP AND status = \"In Progress\" ORDER BY updated DESC",
            "is:pr is:open label:bug repo:octo/shop",
        ]
    } else if has(&["path", "file", "dir", "folder", "cwd"]) {
        [
            "/home/alice/projects/shop/src/main.rs",
            "./docs/README.md",
            "C:\\Users\\alice\\Documents\\report.xlsx",
        ]
    } else if has(&["url", "uri", "link", "href", "endpoint", "website"]) {
        [
            "https://github.com/octo/shop/blob/main/src/lib.rs#L42",
            "https://en.wikipedia.org/wiki/Model_Context_Protocol",
            "https://shop.example/checkout?cart=7f3a9c&step=2",
        ]
    } else if has(&["sha", "commit", "hash", "revision", "digest"]) {
        [
            "3f9c2b1a7d4e5f60718293a4b5c6d7e8f9a0b1c2",
            "sha256:9b2f0e4a1c7d3e5f6a8b0c2d4e6f8a1b3c5d7e9f0a2b4c6d8e0f1a3b5c7d9e1f",
            "a1b2c3d",
        ]
    } else if has(&["uuid", "_id", "id"]) {
        [
            "550e8400-e29b-41d4-a716-446655440000",
            "PROJ-1234",
            "01HZX3J9K8Q2W5R7T4Y6U1I0OP",
        ]
    } else if has(&["key", "pubkey", "fingerprint"]) {
        [
            "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl alice@laptop",
            "issue-key-SHOP-42",
            "SHA256:uNiVztksCsDhcc0u9e8BujQXVUpKZIDTMczCvj3tD2s",
        ]
    } else if has(&["token", "cursor", "page", "next"]) {
        [
            "eyJwYWdlIjoyLCJzaXplIjo1MH0",
            "c2Vjb25kLXBhZ2U=",
            "MTcwMDAwMDAwMHxvcmRlcnM",
        ]
    } else if has(&[
        "code",
        "script",
        "source",
        "function",
        "expression",
        "js",
        "snippet",
    ]) {
        [
            "fn main() {\n    let orders = load(\"orders.csv\")?;\n    println!(\"{}\", orders.len());\n}",
            "document.querySelectorAll('a[href^=\"https\"]').forEach(a => a.rel = 'noopener');",
            "def total(items):\n    return sum(i.price * i.qty for i in items)",
        ]
    } else if has(&[
        "content",
        "body",
        "text",
        "message",
        "description",
        "comment",
        "note",
        "prompt",
    ]) {
        [
            "Hi team, the deploy of v2.3.1 went out at 10:00 UTC; rollback plan is in the wiki.",
            "# Release notes\n\n- Fixed the checkout total rounding (#412)\n- Faster search",
            "Please review the attached diff and approve if the migration looks right.",
        ]
    } else if has(&["email", "mail"]) {
        [
            "alice@example.com",
            "ops+alerts@shop.example",
            "bob.smith@corp.example",
        ]
    } else if has(&["selector", "xpath"]) {
        [
            "#main > div.item:nth-child(2)",
            "//button[@type='submit']",
            "input[name=\"q\"]",
        ]
    } else if has(&["date", "time", "since", "until"]) {
        ["2026-12-06T10:00:00Z", "2025-01-31", "last 7 days"]
    } else if has(&["name", "title", "label", "tag"]) {
        ["quarterly-report", "Shop Backend", "release/2026.12"]
    } else {
        ["orders", "Quarterly report for the shop team", "eu-west-1"]
    }
}

pub fn first_type(schema: &Value) -> Option<&str> {
    match schema.get("type") {
        Some(Value::String(t)) => Some(t),
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).find(|t| *t != "null"),
        _ => {
            if schema.get("properties").is_some() {
                Some("object")
            } else if schema.get("items").is_some() {
                Some("array")
            } else {
                None
            }
        }
    }
}

/// A value `schema` accepts, benign, the `variant`th of its kind.
pub fn value(name: &str, schema: &Value, variant: usize, depth: usize) -> Value {
    if let Some(e) = schema
        .get("enum")
        .and_then(Value::as_array)
        .and_then(|e| e.first())
    {
        return e.clone();
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(first) = schema
            .get(key)
            .and_then(Value::as_array)
            .and_then(|a| a.iter().find(|s| s.get("type") != Some(&json!("null"))))
        {
            return value(name, first, variant, depth + 1);
        }
    }
    match first_type(schema) {
        Some("integer") => json!(42 + variant),
        Some("number") => json!(3.5 + variant as f64),
        Some("boolean") => json!(variant.is_multiple_of(2)),
        Some("array") if depth < 6 => {
            let items = schema
                .get("items")
                .cloned()
                .unwrap_or(json!({"type": "string"}));
            json!([value(name, &items, variant, depth + 1)])
        }
        Some("object") if depth < 6 => {
            let mut out = serde_json::Map::new();
            if let Some(props) = schema.get("properties").and_then(Value::as_object) {
                for (k, s) in props {
                    out.insert(k.clone(), value(k, s, variant, depth + 1));
                }
            }
            Value::Object(out)
        }
        Some("array" | "object") => json!(null),
        _ => json!(pool(name, schema.get("format").and_then(Value::as_str))[variant % 3]),
    }
}

pub fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// A home under `d` as a developer's looks (a generated SSH key, AWS and
/// gcloud credentials, a `.netrc`), a project with a `.env`, and the
/// secret-named variables of their environment: (home, project, env).
pub fn realistic_home(d: &Path) -> (PathBuf, PathBuf, Vec<(String, String)>) {
    let home = d.join("home");
    let key = home.join(".ssh/id_ed25519");
    std::fs::create_dir_all(key.parent().unwrap()).unwrap();
    let o = std::process::Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", "alice@laptop", "-f"])
        .arg(&key)
        .output()
        .expect("ssh-keygen runs (.ci/run installs openssh-client)");
    assert!(o.status.success());
    write(
        &home.join(".aws/credentials"),
        "[default]\naws_access_key_id = AKIAQ3EXJ7MPLWD5TZ2N\naws_secret_access_key = 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\nregion = eu-west-1\n",
    );
    write(
        &home.join(".netrc"),
        "machine api.github.com login alice password ghp_Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0Fe9Dc8\n",
    );
    write(
        &home.join(".config/gcloud/application_default_credentials.json"),
        r#"{"client_id":"764086051850-6qr4p6gpi6hn506pt8ejuq83di341hur.apps.googleusercontent.com","client_secret":"d-FL95Q19q7MQmFpd7hHD0Ty","refresh_token":"1//0gWq3k9Zx7Lm2Np4Rt6Vb8Yc0Ae2Gi4Kk6Mo8Qs0Uw","type":"authorized_user"}"#,
    );
    let project = d.join("project");
    write(
        &project.join(".env"),
        "NODE_ENV=development\nPORT=3000\nSTRIPE_SECRET_KEY=sk_test_51Hx9Zq2Lm4Np8Rt1Ws5Yz3Ac6Df0Gh\nDATABASE_URL=postgres://app:s3cure-db-pass-77@localhost:5432/shop\n",
    );
    let env = vec![(
        "OPENAI_API_KEY".to_owned(),
        "sk-proj-Qw8Er7Ty6Ui5Op4As3Df2Gh1Jk0Lz9Xc8Vb7Nm6".to_owned(),
    )];
    (home, project, env)
}
