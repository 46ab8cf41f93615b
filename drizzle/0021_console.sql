CREATE INDEX `task_runs_finished` ON `task_runs` (`finished_at`);--> statement-breakpoint
ALTER TABLE `task_runs` ADD `result` varchar(200);--> statement-breakpoint
ALTER TABLE `tasks` ADD `last_result` varchar(200);