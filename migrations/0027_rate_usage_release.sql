-- A claim handed back without doing the work (a release, a claim whose start lapsed: claimed or running → ready,
-- no attempt spent) gives its rate-limit reservation back: otherwise claiming and releasing in a loop would fill a
-- model's requests window for the whole fleet without a single call to the provider.
CREATE FUNCTION dagent_rate_usage_release() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
  DELETE FROM rate_usage WHERE task_id = OLD.id AND fence = OLD.fence;
  RETURN NULL;
END $$;--> statement-breakpoint
CREATE TRIGGER tasks_rate_usage_release AFTER UPDATE OF status ON tasks FOR EACH ROW
  WHEN (OLD.status IN ('claimed', 'running') AND NEW.status = 'ready')
  EXECUTE FUNCTION dagent_rate_usage_release();--> statement-breakpoint
-- An attempt's reported tokens replace its reservation, but never count for more than its limit's whole window:
-- a report of a billion tokens would otherwise hold the model up for everyone for a window.
CREATE OR REPLACE FUNCTION dagent_rate_usage_correct() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
  UPDATE rate_usage u SET tokens_used = least(NEW.tokens_in + NEW.tokens_out, 2147483647,
    coalesce((SELECT l.tokens FROM rate_limits l WHERE l.key = u.key), 2147483647))
  WHERE u.task_id = NEW.task_id AND u.fence = NEW.fence;
  RETURN NULL;
END $$;
