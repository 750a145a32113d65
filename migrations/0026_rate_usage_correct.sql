-- An attempt that reported its tokens corrects what its claim reserved under a declared rate limit: its
-- rate_usage rows count the tokens used (in + out) from now on, instead of the estimate. Fired only when
-- tokens were reported, so the attempts of work without token reports (and the hot path of no-op tasks) pay
-- nothing. An UPDATE too: a validated attempt's tokens are added when its verdict finishes it.
CREATE FUNCTION dagent_rate_usage_correct() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
  UPDATE rate_usage SET tokens_used = least(NEW.tokens_in + NEW.tokens_out, 2147483647)
  WHERE task_id = NEW.task_id AND fence = NEW.fence;
  RETURN NULL;
END $$;--> statement-breakpoint
CREATE TRIGGER attempts_rate_usage_correct AFTER INSERT OR UPDATE OF tokens_in, tokens_out ON attempts FOR EACH ROW
  WHEN (NEW.tokens_in + NEW.tokens_out > 0)
  EXECUTE FUNCTION dagent_rate_usage_correct();
