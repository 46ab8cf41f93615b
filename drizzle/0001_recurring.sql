ALTER TABLE `tasks` ADD `cron` varchar(120);--> statement-breakpoint
ALTER TABLE `tasks` ADD `series_id` bigint unsigned;--> statement-breakpoint
ALTER TABLE `tasks` ADD CONSTRAINT `tasks_series_run_at` UNIQUE(`series_id`,`run_at`);