-- A for_each task (wait_key map/<id>) waits for the waits loop to map over its list, then to collect its
-- children's outputs: its task.waiting event says so, rather than naming the key as if a signal could come.
CREATE OR REPLACE FUNCTION dagent_task_waiting_event() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
  -- An approval step's validation task (wait_key approval/<task>) waits for a person: say whose output, not a key.
  INSERT INTO events (type, dag_id, task_id, data)
    VALUES ('task.waiting', NEW.dag_id, NEW.id, CASE
      WHEN starts_with(NEW.wait_key, 'approval/')
        THEN jsonb_build_object('approval_of', NEW.validates_id, 'step', NEW.validation_step, 'attempt', NEW.attempts, 'timeout_sec', NEW.wait_timeout_sec)
      WHEN starts_with(NEW.wait_key, 'map/')
        THEN jsonb_build_object('for_each', CASE WHEN NEW.has_children THEN 'collect' ELSE 'map' END, 'attempt', NEW.attempts)
      ELSE jsonb_build_object('signal', NEW.wait_key, 'attempt', NEW.attempts, 'timeout_sec', NEW.wait_timeout_sec) END);
  RETURN NULL;
END $$;
