CREATE TABLE `punctual_task_tags` (
	`task_id` bigint unsigned NOT NULL,
	`tag` varchar(64) NOT NULL,
	CONSTRAINT `task_tags_pk` PRIMARY KEY(`task_id`,`tag`)
);
--> statement-breakpoint
ALTER TABLE `punctual_tasks` ADD `tags` json;--> statement-breakpoint
ALTER TABLE `punctual_tasks` ADD `lateness_ms` bigint;--> statement-breakpoint
ALTER TABLE `punctual_tasks` ADD `last_http_status` smallint unsigned;--> statement-breakpoint
ALTER TABLE `punctual_tasks` ADD `last_duration_ms` int unsigned;--> statement-breakpoint
ALTER TABLE `punctual_tasks` ADD `last_response_bytes` int unsigned;--> statement-breakpoint
ALTER TABLE `punctual_tasks` ADD `bulk_request_id` varchar(64);--> statement-breakpoint
ALTER TABLE `punctual_task_tags` ADD CONSTRAINT `task_tags_task_fk` FOREIGN KEY (`task_id`) REFERENCES `punctual_tasks`(`id`) ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX `task_tags_tag_task` ON `punctual_task_tags` (`tag`,`task_id`);--> statement-breakpoint
CREATE INDEX `tasks_type_status` ON `punctual_tasks` (`type`,`status`);