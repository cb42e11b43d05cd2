//! Fronts seen (`store::fronts`) on Redis: `P:front:<key>`, one string (the record's JSON)
//! expiring with the record. One key per command, so one server and a cluster alike.

use super::RedisStore;
use crate::store::ThreadError;
use crate::store::fronts::SeenFront;

impl RedisStore {
    fn front_key(&self, key: &str) -> String {
        format!("{}:front:{key}", self.prefix)
    }

    pub(super) async fn get_front(&self, key: &str) -> Result<Option<SeenFront>, ThreadError> {
        let key = self.front_key(key);
        let text: Option<String> = self
            .run(|mut c| {
                let key = key.clone();
                async move { redis::cmd("GET").arg(key).query_async(&mut c).await }
            })
            .await?;
        Ok(text.as_deref().and_then(SeenFront::read))
    }

    pub(super) async fn put_front(
        &self,
        key: &str,
        front: &SeenFront,
        expires_ms: u64,
    ) -> Result<(), ThreadError> {
        let key = self.front_key(key);
        let value = front.stored();
        let _: () = self
            .run(|mut c| {
                let (key, value) = (key.clone(), value.clone());
                async move {
                    redis::cmd("SET")
                        .arg(key)
                        .arg(value)
                        .arg("PXAT")
                        .arg(expires_ms)
                        .query_async(&mut c)
                        .await
                }
            })
            .await?;
        Ok(())
    }
}
