-- A task with a concurrency key that stops being claimed or running (completed, failed, released, cancelled,
-- reaped, waiting for subtasks, its output under validation) or is deleted releases its key: one row in
-- concurrency_releases, which the next claim that locks the key folds into concurrency_keys.held. An insert, so
-- the transaction that ends a task never waits on the key row a claim holds. The function keeps the search_path
-- it was created under (dagent's schema), whoever's session updates tasks.
CREATE FUNCTION dagent_concurrency_release() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
  INSERT INTO concurrency_releases (key) VALUES (OLD.conc_key);
  RETURN NULL;
END $$;--> statement-breakpoint
CREATE TRIGGER tasks_concurrency_release AFTER UPDATE OF status ON tasks FOR EACH ROW
  WHEN (OLD.conc_key IS NOT NULL AND OLD.status IN ('claimed', 'running') AND NEW.status NOT IN ('claimed', 'running'))
  EXECUTE FUNCTION dagent_concurrency_release();--> statement-breakpoint
CREATE TRIGGER tasks_concurrency_release_deleted AFTER DELETE ON tasks FOR EACH ROW
  WHEN (OLD.conc_key IS NOT NULL AND OLD.status IN ('claimed', 'running'))
  EXECUTE FUNCTION dagent_concurrency_release();
