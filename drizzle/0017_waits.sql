ALTER TABLE `punctual_task_runs` ADD `waited_ms` int unsigned DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE `punctual_task_runs` ADD `wait_reason` enum('pause','limit');--> statement-breakpoint
ALTER TABLE `punctual_tasks` ADD `waited_ms` int unsigned;