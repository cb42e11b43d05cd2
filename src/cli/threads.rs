//! `gemini-mcp threads`: the project's conversation threads from the command line — list, show,
//! export (Markdown or JSON) and delete. Only the local user's threads of this project.

use std::io::Write;
use std::sync::Arc;

use crate::app::{App, thread_views};
use crate::config::Config;
use crate::store::Owner;
use crate::term::{self, say};

use super::output;

#[derive(Debug, Clone, clap::Subcommand)]
pub enum ThreadsCommand {
    /// The project's threads, newest first: id, last activity, turns, tools, opening words.
    List {
        /// Print JSON instead of one line per thread.
        #[arg(long)]
        json: bool,
        /// Most threads to list.
        #[arg(long, default_value_t = 20)]
        limit: usize,
    },
    /// One thread as Markdown: every turn, the files sent, the answers.
    Show {
        /// A thread id, or "latest".
        id: String,
    },
    /// One thread as Markdown or JSON, for keeping or sharing.
    Export {
        /// A thread id, or "latest".
        id: String,
        /// markdown or json.
        #[arg(long, default_value = "markdown")]
        format: String,
    },
    /// Deletes a thread.
    Delete {
        /// A thread id, or "latest".
        id: String,
    },
}

/// What a threads command prints: text (Markdown, a listing) or a JSON document.
enum Printed {
    Text(String),
    Json(serde_json::Value),
}

pub async fn run(config: &Arc<Config>, command: ThreadsCommand) -> u8 {
    let app = match App::start(config.clone()).await {
        Ok(app) => app,
        Err(e) => {
            say!("gemini-mcp threads: {e}");
            return output::COULD_NOT_RUN;
        }
    };
    let owner = Owner::local();
    let result = match command {
        ThreadsCommand::List { json, limit } => {
            thread_views::list(&app, &owner, limit).await.map(|list| {
                if json {
                    Printed::Json(thread_views::list_json(&list))
                } else {
                    Printed::Text(thread_views::list_text(&list))
                }
            })
        }
        ThreadsCommand::Show { id } => thread_views::load(&app, &owner, &id)
            .await
            .map(|t| Printed::Text(thread_views::markdown(&t))),
        ThreadsCommand::Export { id, format } => match format.as_str() {
            "markdown" | "md" => thread_views::load(&app, &owner, &id)
                .await
                .map(|t| Printed::Text(thread_views::markdown(&t))),
            "json" => thread_views::load(&app, &owner, &id)
                .await
                .map(|t| Printed::Json(thread_views::thread_json(&t))),
            other => {
                say!(
                    "gemini-mcp threads export: --format {other} is not a format; use markdown or json"
                );
                return output::COULD_NOT_RUN;
            }
        },
        ThreadsCommand::Delete { id } => thread_views::delete(&app, &owner, &id)
            .await
            .map(|id| Printed::Text(format!("deleted {id}\n"))),
    };
    match result {
        Ok(printed) => {
            // Stored answers and prompts came from outside: the sink shows their controls.
            let mut out = term::stdout();
            let written = match &printed {
                Printed::Text(text) => out.text(text),
                Printed::Json(doc) => out.json(doc),
            };
            match written.and_then(|()| out.flush()) {
                Ok(()) => 0,
                Err(e) => {
                    drop(out);
                    say!("gemini-mcp threads: cannot write the output: {e}");
                    output::COULD_NOT_RUN
                }
            }
        }
        Err(e) => {
            say!("gemini-mcp threads: {e}");
            output::COULD_NOT_RUN
        }
    }
}
