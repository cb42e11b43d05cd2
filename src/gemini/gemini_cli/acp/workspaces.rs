//! Which thread holds each caller's conversation in a workspace: the bridge's `gemini` calls
//! naming the same workspace continue one conversation (one agent session), per caller, until
//! it is reset.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::lock;

/// (caller, workspace) → thread. The caller is the thread owner's id, so one client never
/// continues another's conversation.
#[derive(Debug, Default)]
pub struct Workspaces(Mutex<HashMap<(String, PathBuf), String>>);

impl Workspaces {
    /// The thread holding `owner`'s conversation in `workspace`.
    pub fn thread(&self, owner: &str, workspace: &Path) -> Option<String> {
        lock(&self.0)
            .get(&(owner.to_string(), workspace.to_path_buf()))
            .cloned()
    }

    /// `thread` holds `owner`'s conversation in `workspace` from now on.
    pub fn set(&self, owner: &str, workspace: &Path, thread: &str) {
        lock(&self.0).insert(
            (owner.to_string(), workspace.to_path_buf()),
            thread.to_string(),
        );
    }

    /// `owner`'s workspaces and their threads, by path.
    pub fn of(&self, owner: &str) -> Vec<(PathBuf, String)> {
        let mut out: Vec<(PathBuf, String)> = lock(&self.0)
            .iter()
            .filter(|((o, _), _)| o == owner)
            .map(|((_, w), t)| (w.clone(), t.clone()))
            .collect();
        out.sort();
        out
    }

    /// Forgets `owner`'s conversations in the workspaces `selector` names — every one when it is
    /// empty, else the workspace of exactly that path, else those whose path ends with it — so
    /// that the next call there starts afresh. The threads themselves stay in the history.
    pub fn reset(&self, owner: &str, selector: &str) -> Vec<(PathBuf, String)> {
        let mine = self.of(owner);
        let chosen: Vec<(PathBuf, String)> = if selector.is_empty() {
            mine
        } else if let Some(exact) = mine.iter().find(|(w, _)| w.as_os_str() == selector) {
            vec![exact.clone()]
        } else {
            let tail = Path::new(selector.trim_end_matches('/'));
            mine.into_iter()
                .filter(|(w, _)| !tail.as_os_str().is_empty() && w.ends_with(tail))
                .collect()
        };
        let mut map = lock(&self.0);
        for (w, _) in &chosen {
            map.remove(&(owner.to_string(), w.clone()));
        }
        chosen
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversations_are_per_caller_and_reset_by_path() {
        let w = Workspaces::default();
        w.set("alice", Path::new("/p"), "t1");
        w.set("alice", Path::new("/p/src"), "t2");
        w.set("bob", Path::new("/p"), "t3");
        assert_eq!(w.thread("alice", Path::new("/p")).as_deref(), Some("t1"));
        assert_eq!(w.thread("bob", Path::new("/p")).as_deref(), Some("t3"));
        assert_eq!(w.thread("carol", Path::new("/p")), None);
        // An exact path first; else the workspaces ending with it, by whole components.
        assert_eq!(w.reset("alice", "/p"), [(PathBuf::from("/p"), "t1".into())]);
        assert!(w.reset("alice", "rc").is_empty());
        assert_eq!(
            w.reset("alice", "src/"),
            [(PathBuf::from("/p/src"), "t2".into())]
        );
        assert_eq!(w.thread("bob", Path::new("/p")).as_deref(), Some("t3"));
        assert_eq!(w.reset("bob", "").len(), 1);
        assert!(w.of("bob").is_empty());
    }
}
