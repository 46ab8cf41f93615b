ALTER TABLE `punctual_tasks` ADD `priority` tinyint DEFAULT 0 NOT NULL, DROP INDEX `tasks_status_run_at`, ADD INDEX `tasks_status_run_at` (`status`,`run_at`,`id`,`priority`);
