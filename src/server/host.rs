//! The hosts' own surfaces beside the tools: prompts (slash commands), resources (the project's
//! threads and the model catalogue) and completions. The content comes from `workflows`
//! and `app::thread_views`; this file only speaks MCP.

use std::collections::BTreeMap;
use std::sync::Arc;

use rmcp::ErrorData;
use rmcp::model::{
    ArgumentInfo, CompleteResult, CompletionInfo, GetPromptResult, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, Prompt, PromptArgument, PromptMessage,
    ReadResourceResult, Reference, Resource, ResourceContents, ResourceTemplate, Role,
};

use super::workflows;
use crate::app::{App, thread_views};
use crate::store::Owner;
use crate::tools::ToolError;

const THREADS: &str = "gemini-mcp://threads";
const THREAD_TEMPLATE: &str = "gemini-mcp://threads/{id}";
const MODELS: &str = "gemini-mcp://models";

pub fn list_prompts() -> ListPromptsResult {
    let prompts = workflows::WORKFLOWS
        .iter()
        .map(|w| {
            let args = w
                .arguments
                .iter()
                .map(|a| {
                    PromptArgument::new(a.name)
                        .with_description(a.description)
                        .with_required(a.required)
                })
                .collect();
            Prompt::new(w.name, Some(w.description), Some(args)).with_title(w.title)
        })
        .collect();
    ListPromptsResult::with_all_items(prompts)
}

pub fn get_prompt(
    name: &str,
    arguments: Option<&serde_json::Map<String, serde_json::Value>>,
) -> Result<GetPromptResult, ErrorData> {
    let mut args = BTreeMap::new();
    for (k, v) in arguments.into_iter().flatten() {
        let text = match v {
            serde_json::Value::String(s) => s.clone(),
            serde_json::Value::Null => continue,
            other => other.to_string(),
        };
        args.insert(k.clone(), text);
    }
    let text = workflows::render(name, &args).map_err(invalid)?;
    let mut result = GetPromptResult::new(vec![PromptMessage::new_text(Role::User, text)]);
    result.description = workflows::find(name).map(|w| w.description.to_string());
    Ok(result)
}

fn invalid(e: ToolError) -> ErrorData {
    match e {
        ToolError::InvalidArgument { field, message } => ErrorData::invalid_params(
            format!("invalid `{field}`: {message}"),
            Some(serde_json::json!({ "field": field })),
        ),
        other => ErrorData::internal_error(other.to_string(), None),
    }
}

/// The threads listing and the model catalogue; one thread per resource through the template.
pub async fn list_resources(app: &Arc<App>, owner: &Owner) -> ListResourcesResult {
    let mut resources = vec![
        Resource::new(THREADS, "threads")
            .with_title("This project's conversation threads")
            .with_description("Newest first: id, tools used, turns, last activity, the first request's opening words.")
            .with_mime_type("application/json")
            ,
        Resource::new(MODELS, "models")
            .with_title("Gemini models")
            .with_description("The model catalogue: names, aliases, context windows, thinking.")
            .with_mime_type("application/json")
            ,
    ];
    if let Ok(list) = thread_views::list(app, owner, 20).await {
        for t in list {
            resources.push(
                Resource::new(
                    format!("{THREADS}/{}", t.id),
                    format!("thread {}", &t.id[..8]),
                )
                .with_title(t.title.clone())
                .with_description(format!(
                    "{} turn(s), {}; last {}",
                    t.turns,
                    t.tools.join(", "),
                    thread_views::iso(t.last_ms)
                ))
                .with_mime_type("text/markdown"),
            );
        }
    }
    ListResourcesResult::with_all_items(resources)
}

pub fn list_resource_templates() -> ListResourceTemplatesResult {
    ListResourceTemplatesResult::with_all_items(vec![
        ResourceTemplate::new(THREAD_TEMPLATE, "thread")
            .with_title("One conversation thread")
            .with_description("Every turn as Markdown: the request, the files sent, Gemini's answer. `latest` is the newest.")
            .with_mime_type("text/markdown")
            ,
    ])
}

pub async fn read_resource(
    app: &Arc<App>,
    owner: &Owner,
    uri: &str,
) -> Result<ReadResourceResult, ErrorData> {
    let json = |v: serde_json::Value| {
        ReadResourceResult::new(vec![
            ResourceContents::text(
                serde_json::to_string_pretty(&v).unwrap_or_default(),
                uri.to_string(),
            )
            .with_mime_type("application/json"),
        ])
    };
    if uri == THREADS {
        let list = thread_views::list(app, owner, thread_views::LIST_LIMIT)
            .await
            .map_err(to_error)?;
        return Ok(json(thread_views::list_json(&list)));
    }
    if uri == MODELS {
        let report = crate::tools::listmodels::report(app.gemini(), app.store_kind());
        return Ok(json(serde_json::to_value(report).unwrap_or_default()));
    }
    if let Some(id) = uri.strip_prefix(&format!("{THREADS}/")) {
        let thread = thread_views::load(app, owner, id)
            .await
            .map_err(to_error)?;
        return Ok(ReadResourceResult::new(vec![
            ResourceContents::text(thread_views::markdown(&thread), uri.to_string())
                .with_mime_type("text/markdown"),
        ]));
    }
    let uri = crate::echo::echo(uri);
    Err(ErrorData::resource_not_found(
        format!("no resource `{uri}`: the resources are {THREADS}, {THREAD_TEMPLATE} and {MODELS}"),
        Some(serde_json::json!({ "uri": uri })),
    ))
}

fn to_error(e: ToolError) -> ErrorData {
    match e {
        ToolError::Thread(t) => ErrorData::resource_not_found(t.to_string(), None),
        ToolError::InvalidArgument { .. } => invalid(e),
        other => ErrorData::internal_error(other.to_string(), None),
    }
}

/// Completions: thread ids for the thread template, model names (aliases first) for `model`
/// arguments, and the arguments of our prompts that have a closed set of values.
pub async fn complete(
    app: &Arc<App>,
    owner: &Owner,
    reference: &Reference,
    argument: &ArgumentInfo,
) -> CompleteResult {
    let typed = argument.value.as_str();
    let candidates: Vec<String> = match reference {
        Reference::Resource(r) if r.uri == THREAD_TEMPLATE && argument.name == "id" => {
            let mut ids = vec!["latest".to_string()];
            if let Ok(list) = thread_views::list(app, owner, thread_views::LIST_LIMIT).await
            {
                ids.extend(list.into_iter().map(|t| t.id));
            }
            ids
        }
        _ if argument.name == "model" => {
            let report =
                crate::tools::listmodels::report(app.gemini(), app.store_kind());
            let mut names: Vec<String> = Vec::new();
            for m in &report.models {
                names.extend(m.aliases.iter().cloned());
            }
            names.extend(report.models.into_iter().map(|m| m.id));
            names
        }
        Reference::Prompt(p) if p.name == "review-changes" && argument.name == "compare_to" => {
            vec![
                "main".into(),
                "master".into(),
                "HEAD~1".into(),
                "origin/main".into(),
            ]
        }
        _ => Vec::new(),
    };
    let values: Vec<String> = candidates
        .into_iter()
        .filter(|c| c.starts_with(typed))
        .collect();
    let total = values.len();
    let shown: Vec<String> = values
        .into_iter()
        .take(CompletionInfo::MAX_VALUES)
        .collect();
    let info = CompletionInfo::with_pagination(
        shown,
        Some(total as u32),
        total > CompletionInfo::MAX_VALUES,
    )
    .unwrap_or_default();
    CompleteResult::new(info)
}
