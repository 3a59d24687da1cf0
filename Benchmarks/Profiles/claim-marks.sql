-- For each latency request (l.*), when the database saw its claim and its start: the
-- statement's execution beginning (statement_timestamp(): the receipt of its Execute
-- message, after its Parse and Bind) and the row's update (clock_timestamp()).
SET client_min_messages = warning;
CREATE SCHEMA IF NOT EXISTS profile;
DROP TABLE IF EXISTS profile.marks;
CREATE TABLE profile.marks (identifier text, kind text, backend int, statement_at timestamptz, at timestamptz);
CREATE OR REPLACE FUNCTION profile.mark() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF starts_with(NEW.identifier, 'l.') THEN
        IF NEW.running AND NOT OLD.running THEN
            INSERT INTO profile.marks VALUES (NEW.identifier, 'start', pg_backend_pid(), statement_timestamp(), clock_timestamp());
        ELSIF NEW.claimed_by IS NOT NULL AND NEW.claimed_by IS DISTINCT FROM OLD.claimed_by AND NOT NEW.running THEN
            INSERT INTO profile.marks VALUES (NEW.identifier, 'claim', pg_backend_pid(), statement_timestamp(), clock_timestamp());
        END IF;
    END IF;
    RETURN NEW;
END $$;
DROP TRIGGER IF EXISTS mark ON overtime.requests;
CREATE TRIGGER mark BEFORE UPDATE ON overtime.requests FOR EACH ROW EXECUTE FUNCTION profile.mark();
