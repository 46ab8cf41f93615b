ALTER TABLE `task_runs` ADD `waited_ms` int unsigned DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE `task_runs` ADD `wait_reason` enum('pause','limit');--> statement-breakpoint
ALTER TABLE `tasks` ADD `waited_ms` int unsigned;