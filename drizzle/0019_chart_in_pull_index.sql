ALTER TABLE `punctual_tasks` ADD INDEX `tasks_type_status_run_minute_run_at` (`type`,`status`,`run_minute`,`run_at`), DROP INDEX `tasks_status_run_minute_type`, DROP INDEX `tasks_type_status_run_at`;
