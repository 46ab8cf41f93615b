ALTER TABLE `punctual_tasks` ADD `cron` varchar(120);--> statement-breakpoint
ALTER TABLE `punctual_tasks` ADD `series_id` bigint unsigned;--> statement-breakpoint
ALTER TABLE `punctual_tasks` ADD CONSTRAINT `tasks_series_run_at` UNIQUE(`series_id`,`run_at`);