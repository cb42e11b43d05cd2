//! Vertex AI instead of the Gemini API: the project, location, endpoint, credentials and labels
//! (`gemini::Settings::vertex`). The switch comes first: the others fill in what it made.

use std::path::PathBuf;

use super::row::Read::Gemini;
use super::row::{Category, Group, ROW, Setting};

pub(super) const GROUP: Group = Group {
    category: Category::VertexAi,
    rows: &[
        Setting {
            name: "GOOGLE_GENAI_USE_VERTEXAI",
            default: "false",
            doc: "`true`: reach Gemini through Vertex AI (as Google's SDKs and the Gemini CLI do), with `GOOGLE_CLOUD_PROJECT` and Application Default Credentials, or with `GOOGLE_API_KEY` alone (express mode).",
            read: Gemini(|var, g| {
                g.vertex = var.flag()?.then(|| crate::gemini::VertexSettings {
                    project: None,
                    location: String::new(),
                    base_url: None,
                    api_key: None,
                    labels: Vec::new(),
                    credentials_file: None,
                });
                Ok(())
            }),
            ..ROW
        },
        Setting {
            name: "GOOGLE_CLOUD_PROJECT",
            default: "—",
            doc: "The Google Cloud project Vertex AI bills and authorises (with `GOOGLE_GENAI_USE_VERTEXAI=true`).",
            read: Gemini(|var, g| {
                let project = var.get().map(|p| p.trim().to_string());
                if let Some(v) = g.vertex.as_mut() {
                    v.project = project;
                }
                Ok(())
            }),
            ..ROW
        },
        Setting {
            name: "GOOGLE_CLOUD_LOCATION",
            default: "global",
            doc: "The Vertex AI location (`global`, or a region such as `europe-west4`).",
            read: Gemini(|var, g| {
                let location = var.value().map(|l| l.trim().to_string());
                if let (Some(v), Some(l)) = (g.vertex.as_mut(), location) {
                    if !l.chars().all(|ch| ch.is_ascii_alphanumeric() || ch == '-') {
                        return Err(var.invalid(format!(
                            "`{l}` is not a location; use global or a region such as us-central1"
                        )));
                    }
                    v.location = l;
                }
                Ok(())
            }),
            ..ROW
        },
        Setting {
            name: "GOOGLE_VERTEX_BASE_URL",
            default: "—",
            doc: "Vertex AI endpoint override (scheme and host), for proxies and tests; by default Google's endpoint for the location.",
            read: Gemini(|var, g| {
                let base = var
                    .get()
                    .map(|b| b.trim().trim_end_matches('/').to_string());
                if let (Some(v), Some(b)) = (g.vertex.as_mut(), base) {
                    if !(b.starts_with("http://") || b.starts_with("https://")) {
                        return Err(var.invalid("must start with http:// or https://"));
                    }
                    if crate::secret::without_user_info(&b).is_ok_and(|u| u.authorization.is_some())
                    {
                        return Err(var.invalid("holds user info (`user:password@`): Vertex AI takes its bearer token or GOOGLE_API_KEY; leave it out"));
                    }
                    v.base_url = Some(b);
                }
                Ok(())
            }),
            ..ROW
        },
        Setting {
            name: "GOOGLE_APPLICATION_CREDENTIALS",
            default: "—",
            doc: "Vertex AI's Application Default Credentials: a service-account key, gcloud authorized-user or external-account (workload identity federation) file; else gcloud's `application-default login` file, else the metadata server. Read by Google's auth library; `doctor` names the source.",
            also_reads: &["CLOUDSDK_CONFIG", "HOME"],
            read: Gemini(|var, g| {
                g.google_application_credentials = var.env().map(PathBuf::from);
                g.gcloud_adc_file = var
                    .os("CLOUDSDK_CONFIG")
                    .map(PathBuf::from)
                    .or_else(|| {
                        var.os("HOME")
                            .map(|h| PathBuf::from(h).join(".config/gcloud"))
                    })
                    .map(|d| d.join("application_default_credentials.json"));
                note_adc_file(var.name(), g);
                Ok(())
            }),
            ..ROW
        },
        Setting {
            name: "GEMINI_MCP_VERTEX_LABELS",
            default: "—",
            doc: "Labels sent with each Vertex AI request for cost attribution, e.g. `team=payments,env=ci`.",
            read: Gemini(|var, g| {
                let mut labels = Vec::new();
                for item in var.list() {
                    let Some((k, v)) = item.split_once('=') else {
                        return Err(var.invalid(format!("`{item}` is not key=value")));
                    };
                    let ok = |s: &str| {
                        !s.is_empty()
                            && s.len() <= 63
                            && s.chars().all(|ch| {
                                ch.is_ascii_lowercase()
                                    || ch.is_ascii_digit()
                                    || ch == '-'
                                    || ch == '_'
                            })
                    };
                    if !ok(k.trim()) || !(v.trim().is_empty() || ok(v.trim())) {
                        return Err(var.invalid(format!(
                            "`{item}`: keys and values are lowercase letters, digits, - and _ (at most 63)"
                        )));
                    }
                    labels.push((k.trim().to_string(), v.trim().to_string()));
                }
                if let Some(v) = g.vertex.as_mut() {
                    v.labels = labels;
                }
                Ok(())
            }),
            ..ROW
        },
    ],
};

/// Tells Vertex AI's settings the Application Default Credentials file Google's auth library
/// will read, with what names it: the file `setting` names, else gcloud's file when there is
/// one (else the library asks the metadata server and reads no file).
fn note_adc_file(setting: &'static str, g: &mut crate::gemini::Settings) {
    let file = match (&g.google_application_credentials, &g.gcloud_adc_file) {
        (Some(p), _) => Some((setting, p.clone())),
        (None, Some(p)) if p.symlink_metadata().is_ok() => {
            Some(("gcloud's application-default credentials file", p.clone()))
        }
        _ => None,
    };
    if let Some(v) = g.vertex.as_mut() {
        v.credentials_file = file;
    }
}
