-- Each latency request's steps, in microseconds, on this machine's one clock (the workers'
-- and the database's): due time → the worker's cycle begins (its start time in the history)
-- → the claim's execution begins → its row is claimed → the start's execution begins → its
-- row is marked running → the handler has run (the attempt's end time in the history).
-- A statement's execution begins at statement_timestamp(), the receipt of the extended
-- protocol's last message (Execute): its Parse and its Bind (which plans) come before.
WITH marks AS (
    SELECT identifier,
        min(extract(epoch FROM statement_at) * 1e9) FILTER (WHERE kind = 'claim') AS claim_sent,
        min(extract(epoch FROM at) * 1e9) FILTER (WHERE kind = 'claim') AS claimed,
        min(extract(epoch FROM statement_at) * 1e9) FILTER (WHERE kind = 'start') AS start_sent,
        min(extract(epoch FROM at) * 1e9) FILTER (WHERE kind = 'start') AS started
    FROM profile.marks GROUP BY identifier),
steps AS (
    SELECT s.step, s.ord, s.us FROM overtime.requests q
    JOIN overtime.history h ON h.identifier = q.identifier AND h.result = 'succeeded'
    JOIN marks m ON m.identifier = q.identifier,
    LATERAL (VALUES
        (1, 'due → cycle begins (timer, queue)', (h.started_at - q.earliest_begin) / 1000.0),
        (2, 'cycle → claim executes (send, parse, plan)', (m.claim_sent - h.started_at) / 1000.0),
        (3, 'claim executes until its row is claimed', (m.claimed - m.claim_sent) / 1000.0),
        (4, 'claimed → start executes (reply, worker, parse, plan)', (m.start_sent - m.claimed) / 1000.0),
        (5, 'start executes until its row runs', (m.started - m.start_sent) / 1000.0),
        (6, 'row runs → handler ran (commit, reply, handler)', (h.ended_at - m.started) / 1000.0),
        (7, 'due → handler ran', (h.ended_at - q.earliest_begin) / 1000.0)) AS s(ord, step, us)
    WHERE starts_with(q.identifier, 'l.'))
SELECT step, count(*) AS requests, round(avg(us)) AS mean,
    round(percentile_disc(0.5) WITHIN GROUP (ORDER BY us)) AS p50,
    round(percentile_disc(0.9) WITHIN GROUP (ORDER BY us)) AS p90,
    round(percentile_disc(0.99) WITHIN GROUP (ORDER BY us)) AS p99
FROM steps GROUP BY step, ord ORDER BY ord;
